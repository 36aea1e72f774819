//! CPU time used by this process, from `/proc/self/stat` (Linux); `None` elsewhere.

/// Clock ticks per second of `/proc` times; 100 on every mainstream Linux build.
const TICKS_PER_SEC: f64 = 100.0;

/// User + system CPU seconds this process has used so far.
pub(crate) fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) may contain spaces; the fields after it are space separated.
    let after_name = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = after_name.split(' ').collect();
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the name.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / TICKS_PER_SEC)
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_a_plausible_value_on_linux() {
        if cfg!(target_os = "linux") {
            let cpu = super::cpu_seconds().expect("readable on Linux");
            assert!((0.0..1.0e6).contains(&cpu));
        }
    }
}
