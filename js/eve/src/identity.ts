import { createHash } from "node:crypto";

/**
 * The UUID namespace of the default user ids:
 * `uuid5(NAMESPACE_URL, "urn:pgmemory-eve:scope-key")`.
 */
export const SCOPE_KEY_NAMESPACE = "30bd157d-da5b-56ba-a896-34cc90ef60f1";

/**
 * The pgmemory user id of an eve scope: the name-based (version 5, SHA-1)
 * UUID of `memory.scope.key` in `SCOPE_KEY_NAMESPACE`. The same key always
 * gives the same user, and Python computes it the same way:
 * `uuid.uuid5(uuid.UUID(SCOPE_KEY_NAMESPACE), scope_key)`.
 */
export function userIdFromScopeKey(scopeKey: string): string {
  const namespace = Buffer.from(SCOPE_KEY_NAMESPACE.replaceAll("-", ""), "hex");
  const hash = createHash("sha1").update(namespace).update(scopeKey, "utf8").digest();
  const bytes = hash.subarray(0, 16);
  bytes[6] = (bytes[6]! & 0x0f) | 0x50; // version 5
  bytes[8] = (bytes[8]! & 0x3f) | 0x80; // RFC 4122 variant
  const hex = bytes.toString("hex");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(value: unknown): value is string {
  return typeof value === "string" && UUID.test(value);
}
