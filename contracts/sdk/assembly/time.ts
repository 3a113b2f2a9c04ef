// Antelope's time types, with their binary layouts: a TimePoint is microseconds since 1970
// (i64), a TimePointSec seconds (u32), a BlockTimestamp half-second slots since 2000-01-01
// (u32). The ABI names them time_point, time_point_sec and block_timestamp_type.
import { Datastream } from "./datastream";
import * as env from "./env";

/** 2000-01-01T00:00:00 UTC in milliseconds since 1970: where block slots count from. */
export const BLOCK_TIMESTAMP_EPOCH_MS: i64 = 946684800000;
export const BLOCK_INTERVAL_MS: i64 = 500;

/** A time in microseconds since 1970. */
export class TimePoint {
  constructor(public micros: i64 = 0) {}

  static fromSeconds(seconds: i64): TimePoint {
    return new TimePoint(seconds * 1000000);
  }
  get seconds(): i64 {
    return this.micros / 1000000;
  }
  toSec(): TimePointSec {
    return new TimePointSec(<u32>(this.micros / 1000000));
  }
  read(ds: Datastream): void {
    this.micros = ds.readI64();
  }
  write(ds: Datastream): void {
    ds.writeI64(this.micros);
  }
}

/** A time in whole seconds since 1970. */
export class TimePointSec {
  constructor(public seconds: u32 = 0) {}

  toTimePoint(): TimePoint {
    return TimePoint.fromSeconds(<i64>this.seconds);
  }
  read(ds: Datastream): void {
    this.seconds = ds.readU32();
  }
  write(ds: Datastream): void {
    ds.writeU32(this.seconds);
  }
}

/** A block's slot: half-seconds since 2000-01-01T00:00:00 UTC. */
export class BlockTimestamp {
  constructor(public slot: u32 = 0) {}

  static fromTimePoint(t: TimePoint): BlockTimestamp {
    return new BlockTimestamp(<u32>((t.micros / 1000 - BLOCK_TIMESTAMP_EPOCH_MS) / BLOCK_INTERVAL_MS));
  }
  toTimePoint(): TimePoint {
    return new TimePoint((BLOCK_TIMESTAMP_EPOCH_MS + <i64>this.slot * BLOCK_INTERVAL_MS) * 1000);
  }
  read(ds: Datastream): void {
    this.slot = ds.readU32();
  }
  write(ds: Datastream): void {
    ds.writeU32(this.slot);
  }
}

/** The block's time (the same on every node), as the CDT's current_time_point(). */
export function currentTimePoint(): TimePoint {
  return new TimePoint(env.current_time());
}

/** The block's time in whole seconds. */
export function currentTimePointSec(): TimePointSec {
  return currentTimePoint().toSec();
}

/** The block's slot. */
export function currentBlockTime(): BlockTimestamp {
  return BlockTimestamp.fromTimePoint(currentTimePoint());
}
