//! Structural schemas: validation, defaulting, pruning (being written).
