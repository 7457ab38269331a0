//! Custom resources: the rules of every CRD-defined kind. They carry
//! `generation`; their schema (validation, pruning, defaulting) is applied
//! by the generic path from the resource's structural schema.

use crate::storage::registry::Strategy;

#[derive(Debug)]
pub struct Custom;

impl Strategy for Custom {
    fn has_generation(&self) -> bool {
        true
    }
}
