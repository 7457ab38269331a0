//! The conformance suite on the in-memory backend.

store::store_conformance_tests!(|| async { store::MemoryStore::new() });
