//! Wiring of the prober and the weeder for a binary.
