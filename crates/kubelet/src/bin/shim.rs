//! The container supervisor as a program of its own, for the kubelet
//! crate's tests; `trellis kubelet shim` runs the same code.

fn main() {}
