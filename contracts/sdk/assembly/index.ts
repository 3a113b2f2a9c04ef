// The BoR contract SDK: import what a contract needs from "sdk".
export { Name, n, nameToString } from "./name";
export {
  check,
  checkCode,
  requireAuth,
  requireRecipient,
  hasAuth,
  isAccount,
  receiver,
  currentTime,
  blockNum,
  print,
  actionDataBytes,
  setReturnValue,
  emitEvent,
  sha256,
} from "./system";
export { Datastream, Serializable, unpack } from "./datastream";
export { Asset, Symbol, symbolCode, MAX_AMOUNT } from "./asset";
export {
  Table,
  Row,
  Cursor,
  SecondaryIndex,
  IndexCursor,
  SAME_PAYER,
  MAX_INDEXES,
  KeyType,
  SecondaryKey,
  IndexSpec,
} from "./table";
export {
  Action,
  PermissionLevel,
  sendInline,
  sendNativeTransfer,
  TransferArgs,
  NATIVE_TOKEN,
} from "./inline";
export {
  sha1,
  sha512,
  ripemd160,
  assertSha1,
  assertSha256,
  assertSha512,
  assertRipemd160,
  recoverKey,
  assertRecoverKey,
  PUBLIC_KEY_BYTES,
  SIGNATURE_BYTES,
} from "./crypto";
export {
  TimePoint,
  TimePointSec,
  BlockTimestamp,
  currentTimePoint,
  currentTimePointSec,
  currentBlockTime,
  BLOCK_TIMESTAMP_EPOCH_MS,
  BLOCK_INTERVAL_MS,
} from "./time";
export { U128, I128 } from "./int128";
export { Checksum256, firstReceiver, __bor_enter } from "./contract";
