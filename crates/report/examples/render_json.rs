//! Renders recorded `rdmakit perf --json` files as one page:
//! `cargo run -p rdmakit-report --example render_json -- OUT.html RUN.json...`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let out = args
        .next()
        .ok_or("usage: render_json OUT.html RUN.json...")?;
    let mut runs = Vec::new();
    for f in args {
        runs.push(serde_json::from_str(&std::fs::read_to_string(&f)?)?);
    }
    let html = rdmakit_report::perf::render(&runs, &rdmakit_report::Meta::default())?;
    std::fs::write(out, html)?;
    Ok(())
}
