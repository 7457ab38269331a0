//! Compiles the driver protocol with protox (a protobuf compiler in Rust,
//! so no system `protoc` is needed) and generates the tonic client and
//! server from it.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/trellis/driver/v1/driver.proto";
    println!("cargo:rerun-if-changed={proto}");
    let fds = protox::compile([proto], ["proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)?;
    Ok(())
}
