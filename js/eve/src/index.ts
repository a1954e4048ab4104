export {
  pgmemoryProvider,
  type PgmemoryEmbed,
  type PgmemoryIdentityContext,
  type PgmemoryNamespace,
  type PgmemoryProviderOptions,
} from "./provider.js";
export { pgmemoryDocumentBackend, type PgmemoryDocumentBackendOptions } from "./documents.js";
export { SCOPE_KEY_NAMESPACE, userIdFromScopeKey } from "./identity.js";
export { PgMemoryError } from "./sql.js";
