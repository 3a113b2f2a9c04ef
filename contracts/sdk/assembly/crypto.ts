// Hashes and key recovery, as the CDT's crypto.hpp has them. Keys and signatures travel in
// Antelope's packed form: a type byte (0 = K1), then the 33-byte compressed key or the
// 65-byte compact signature (header 31 + recovery id, r, s).
import * as env from "./env";

/** Bytes of a packed K1 public key and signature. */
export const PUBLIC_KEY_BYTES: i32 = 34;
export const SIGNATURE_BYTES: i32 = 66;

function digest(data: Uint8Array, size: i32, which: i32): Uint8Array {
  const out = new Uint8Array(size);
  if (which == 1) env.sha1(data.dataStart, data.length, out.dataStart);
  else if (which == 256) env.sha256(data.dataStart, data.length, out.dataStart);
  else if (which == 512) env.sha512(data.dataStart, data.length, out.dataStart);
  else env.ripemd160(data.dataStart, data.length, out.dataStart);
  return out;
}

/** SHA-1 of `data` (20 bytes). */
export function sha1(data: Uint8Array): Uint8Array {
  return digest(data, 20, 1);
}

/** SHA-512 of `data` (64 bytes). */
export function sha512(data: Uint8Array): Uint8Array {
  return digest(data, 64, 512);
}

/** RIPEMD-160 of `data` (20 bytes). */
export function ripemd160(data: Uint8Array): Uint8Array {
  return digest(data, 20, 160);
}

/** Abort unless `data` hashes to `hash` by SHA-256 (32 bytes). */
export function assertSha256(data: Uint8Array, hash: Uint8Array): void {
  env.assert_sha256(data.dataStart, data.length, hash.dataStart);
}

/** Abort unless `data` hashes to `hash` by SHA-1 (20 bytes). */
export function assertSha1(data: Uint8Array, hash: Uint8Array): void {
  env.assert_sha1(data.dataStart, data.length, hash.dataStart);
}

/** Abort unless `data` hashes to `hash` by SHA-512 (64 bytes). */
export function assertSha512(data: Uint8Array, hash: Uint8Array): void {
  env.assert_sha512(data.dataStart, data.length, hash.dataStart);
}

/** Abort unless `data` hashes to `hash` by RIPEMD-160 (20 bytes). */
export function assertRipemd160(data: Uint8Array, hash: Uint8Array): void {
  env.assert_ripemd160(data.dataStart, data.length, hash.dataStart);
}

/** The packed public key that made `signature` (packed) over the 32-byte `digest`; aborts on
 * a signature that recovers to no key. */
export function recoverKey(digest: Uint8Array, signature: Uint8Array): Uint8Array {
  const key = new Uint8Array(PUBLIC_KEY_BYTES);
  env.recover_key(
    digest.dataStart, signature.dataStart, signature.length, key.dataStart, key.length,
  );
  return key;
}

/** Abort unless `signature` over `digest` was made by `key` (both packed). */
export function assertRecoverKey(digest: Uint8Array, signature: Uint8Array, key: Uint8Array): void {
  env.assert_recover_key(
    digest.dataStart, signature.dataStart, signature.length, key.dataStart, key.length,
  );
}
