//! The container supervisor as a program of its own, for the kubelet
//! crate's tests; `trellis kubelet shim` runs the same code.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(kubelet::shim::main(&args));
}
