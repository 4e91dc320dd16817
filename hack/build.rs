// A build script is required for cargo to consider the [build-dependencies]
// section, which makes repute-host's build script (the component precompiler)
// see the same features as the libraries.
fn main() {}
