//! Prints a fat tree in ibsim's net format:
//! `cargo run -p rdmakit-fabric --example fat_tree -- SPINES LEAVES HOSTS_PER_LEAF UPLINKS`
//! (4X QDR links; the defaults are 2 4 4 1).

use rdmakit_fabric::fat_tree;
use rdmakit_types::{Speed, Width};

fn main() {
    let args: Vec<u32> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("counts are whole numbers"))
        .collect();
    let [s, l, h, u] = match args[..] {
        [] => [2, 4, 4, 1],
        [s, l, h, u] => [s, l, h, u],
        _ => panic!("usage: fat_tree SPINES LEAVES HOSTS_PER_LEAF UPLINKS"),
    };
    match fat_tree(s, l, h, u, Width::X4, Speed::Qdr) {
        Ok(net) => print!("{net}"),
        Err(e) => {
            eprintln!("fat_tree: {e}");
            std::process::exit(2);
        }
    }
}
