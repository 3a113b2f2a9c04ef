// A test contract of the SDK's inline actions (typed, and the native token's transfer),
// hashes, key recovery and time types. Written by hand (no transform annotations).
import {
  Action, Asset, Datastream, PermissionLevel, Serializable, assertRecoverKey, assertSha256,
  check, currentBlockTime, currentTimePoint, currentTimePointSec, n, print, receiver,
  recoverKey, ripemd160, sendInline, sendNativeTransfer, setReturnValue, sha1, sha256, sha512,
} from "sdk";

class Note extends Serializable {
  constructor(public who: u64 = 0, public text: string = "") {
    super();
  }
  write(ds: Datastream): void {
    ds.writeName(this.who).writeString(this.text);
  }
  read(ds: Datastream): void {
    this.who = ds.readName();
    this.text = ds.readString();
  }
}

export function apply(receiver_: u64, code: u64, action: u64): void {
  const ds = Datastream.fromActionData();
  if (action == n("pay")) {
    const to = ds.readName();
    const quantity = ds.readAsset();
    const memo = ds.readString();
    ds.end();
    sendNativeTransfer(receiver(), to, quantity, memo);
  } else if (action == n("relay")) {
    const note = new Note();
    note.read(ds);
    ds.end();
    sendInline(Action.of(receiver(), n("note"), [new PermissionLevel(receiver())], note));
  } else if (action == n("note")) {
    const note = new Note();
    note.read(ds);
    ds.end();
    print(note.text);
  } else if (action == n("hashes")) {
    const data = ds.readBytes();
    ds.end();
    assertSha256(data, sha256(data));
    const out = new Datastream();
    out.writeFixed(sha1(data)).writeFixed(sha512(data)).writeFixed(ripemd160(data));
    setReturnValue(out.toBytes());
  } else if (action == n("recover")) {
    const digest = ds.readChecksum256();
    const signature = ds.readBytes();
    ds.end();
    const key = recoverKey(digest, signature);
    assertRecoverKey(digest, signature, key);
    setReturnValue(new Datastream().writeBytes(key).toBytes());
  } else if (action == n("now")) {
    ds.end();
    const out = new Datastream();
    currentTimePoint().write(out);
    currentTimePointSec().write(out);
    currentBlockTime().write(out);
    setReturnValue(out.toBytes());
  } else {
    check(false, "unknown action");
  }
}
