// The BoR contract SDK: import what a contract needs from "sdk".
export { Name, n, nameToString } from "./name";
export {
  check,
  checkCode,
  requireAuth,
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
export { sendInline } from "./inline";
