//! Compiles the wallet's services with protox (a pure-Rust .proto compiler: no system protoc).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/wallet.proto");
    let descriptors = protox::compile(["proto/wallet.proto"], ["proto"])?;
    tonic_prost_build::configure().build_server(true).build_client(true).compile_fds(descriptors)?;
    Ok(())
}
