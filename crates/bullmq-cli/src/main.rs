//! The `bullmq` command.
fn main() {}
