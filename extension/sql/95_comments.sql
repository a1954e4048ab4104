-- The public API in one screen: what psql's \df+ and IDEs show for each
-- function. The full reference is docs/sql-reference.md.

COMMENT ON FUNCTION memory.setting(text) IS
    'The current value of a setting (its default unless configured).';
COMMENT ON FUNCTION memory.configure(text, jsonb) IS
    'Service only: change a setting; a null value restores its default.';
COMMENT ON FUNCTION memory.has_permission(uuid, uuid, text) IS
    'The default permission_check: whether memory.grant gave this user this permission in org.';
COMMENT ON FUNCTION memory.grant(uuid, uuid, text) IS
    'Service only: give a user a permission (memory.read, memory.manage) in org.';
COMMENT ON FUNCTION memory.revoke(uuid, uuid, text) IS
    'Service only: take a permission back.';

COMMENT ON FUNCTION memory.run(uuid, jsonb, jsonb) IS
    'One command of Anthropic''s memory tool (view, create, str_replace, insert, delete, rename) on core memory; returns the text for the model.';
COMMENT ON FUNCTION memory.read(uuid, text, jsonb) IS
    'A core memory file with its version, or null.';
COMMENT ON FUNCTION memory.write(uuid, text, text, bigint, jsonb) IS
    'Write a core memory file; expected_version null = unconditional, 0 = must not exist, n = must be at n.';
COMMENT ON FUNCTION memory.list_files(uuid, jsonb) IS
    'The core memory files of a namespace, by path.';
COMMENT ON FUNCTION memory.render(uuid, jsonb, integer) IS
    'Core memory (the organization''s files, then the namespace''s) as delimited text for a system prompt.';
COMMENT ON FUNCTION memory.clear_files(uuid, jsonb) IS
    'Delete every core memory file of a namespace; returns how many.';

COMMENT ON FUNCTION memory.configure_embeddings(integer, text) IS
    'Service only: the dimension and type (vector, halfvec) of every embedding; existing ones turn pending.';
COMMENT ON FUNCTION memory.embedding_status() IS
    'Service only: the configured embedding, and how many memories have one or wait for one.';
COMMENT ON FUNCTION memory.pending_embeddings(integer) IS
    'Service only: lease up to max memories that wait for an embedding.';
COMMENT ON FUNCTION memory.set_memory_embeddings(uuid[], text[], jsonb, text, real[]) IS
    'Service only: write a batch of embeddings (JSON vectors, or embeddings with one row per id), each only while its row still has the text it was computed from.';
COMMENT ON FUNCTION memory.maintain() IS
    'Service only: move the facts of namespaces past exact_search_max_rows into the shared HNSW index, create the HNSW indexes of their own that large namespaces need and drop those of shrunk ones.';
COMMENT ON FUNCTION memory.maintenance_statements() IS
    'Service only: the statements that bring the namespaces'' own HNSW indexes where maintain() would without making writes wait (CREATE/DROP INDEX CONCURRENTLY), ending with maintain(); run each alone, outside a transaction, as the tables'' owner.';

COMMENT ON FUNCTION memory.save_facts(uuid, jsonb, jsonb, double precision, real[]) IS
    'Save facts, refusing near-duplicates (cosine similarity >= threshold) of live facts and of earlier facts of the batch; vectors in the JSON, or as embeddings (one row per fact).';
COMMENT ON FUNCTION memory.save_fact(uuid, text, real[], jsonb, jsonb) IS
    'Save one fact; returns its id, or the id of the live fact it duplicates.';
COMMENT ON FUNCTION memory.forget(uuid, uuid, uuid) IS
    'Hide a fact of org from search and dedupe (it is kept), optionally superseded by another.';
COMMENT ON FUNCTION memory.edit_fact(uuid, uuid, text) IS
    'Replace a fact''s content; returns its new version. Its embedding becomes pending.';
COMMENT ON FUNCTION memory.get_fact(uuid, uuid) IS
    'A fact of org, forgotten ones too.';
COMMENT ON FUNCTION memory.search_facts(uuid, text, real[], jsonb, integer, jsonb) IS
    'Hybrid search of facts: reciprocal rank fusion of vector similarity and full-text rank.';

COMMENT ON FUNCTION memory.index_message(uuid, jsonb, real[]) IS
    'Service only: store one chat message in its owner''s namespace for recall (idempotent).';
COMMENT ON FUNCTION memory.search_messages(uuid, text, real[], text, integer, jsonb) IS
    'The caller''s own closest earlier messages, across chats.';
COMMENT ON FUNCTION memory.delete_chat(uuid, text) IS
    'Delete a chat''s indexed messages: the caller''s own, or (the service) everyone''s.';
COMMENT ON FUNCTION memory.recall_context(uuid, text, real[], jsonb, jsonb) IS
    'What an assistant should see before a turn: core memory, best facts, best earlier messages; replayed per operation_id.';

COMMENT ON FUNCTION memory.document_read(text, text) IS
    'Service only: a versioned document, or null when missing or expired.';
COMMENT ON FUNCTION memory.document_write(text, text, text, bigint, integer) IS
    'Service only: write a document at its expected version (null = must not exist); returns the new version.';
COMMENT ON FUNCTION memory.document_delete(text, text, bigint) IS
    'Service only: delete a document, at its expected version when given.';
COMMENT ON FUNCTION memory.document_list(text, text) IS
    'Service only: the documents of a scope under a path prefix.';
COMMENT ON FUNCTION memory.purge_documents() IS
    'Service only: delete expired documents; returns how many.';

COMMENT ON FUNCTION memory.pending_captures(integer, integer) IS
    'Service only: lease chats pending capture with their new messages and the context before them.';
COMMENT ON FUNCTION memory.capture_facts(uuid, jsonb, text, real[]) IS
    'Service only: apply a model''s add/supersede/forget operations on a leased capture and move the chat''s watermark.';
COMMENT ON FUNCTION memory.fail_capture(uuid, text) IS
    'Service only: give a capture lease back after a failed attempt; parks the chat after capture_max_attempts.';
COMMENT ON FUNCTION memory.retry_captures(uuid, text) IS
    'Service only: put parked (failed) chats of org back in the capture queue; returns how many.';
COMMENT ON FUNCTION memory.capture_status(uuid, text) IS
    'Service only: where each chat of org stands in the capture queue.';

COMMENT ON FUNCTION memory.erase_user(uuid, uuid) IS
    'Service only: delete every file, fact, message and permission of a user in org; returns counts.';
COMMENT ON FUNCTION memory.export(uuid, jsonb) IS
    'Every memory of a namespace as JSON that memory.import loads back.';
COMMENT ON FUNCTION memory.import(uuid, jsonb, jsonb) IS
    'Load an export into a namespace, all or nothing; returns counts.';
COMMENT ON FUNCTION memory.list_facts(uuid, jsonb, integer, uuid, boolean) IS
    'A namespace''s facts a page at a time, oldest first; after_id continues a listing.';
COMMENT ON FUNCTION memory.stats(uuid, jsonb) IS
    'Counts of what a namespace holds (files, facts, pending, forgotten, messages); leases nothing.';
