//! The executors: they observe through kube-rs, call the pure decisions
//! and carry them out.
