use std::process::ExitCode;

use wirebench::Shutdown;

fn main() -> ExitCode {
    let shutdown = Shutdown::new();
    if let Err(e) = shutdown.on_ctrl_c() {
        eprintln!("error: {e:#}");
        return ExitCode::from(1);
    }
    let argv: Vec<String> = std::env::args().collect();
    let code = wirebench::main_with(argv, shutdown, &mut std::io::stdout().lock(), &mut std::io::stderr());
    ExitCode::from(code)
}
