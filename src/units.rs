//! How quantities read in everything the program prints: sizes in binary units (KiB, MiB, GiB:
//! what memory is allocated in), bandwidths in decimal GB/s (what hardware specifications
//! quote), counts with their noun in the right number.

/// Bytes in the largest binary unit that keeps the number at or above one: "494.25 MiB".
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{value:.2} {}", UNITS[unit])
    }
}

/// "1 token", "2 tokens": `noun` is the singular and takes an "s".
pub fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_the_largest_binary_unit_at_or_above_one() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1024), "1.00 KiB");
        assert_eq!(bytes(494 * 1024 * 1024 + 256 * 1024), "494.25 MiB");
        assert_eq!(bytes(15_400_000_000), "14.34 GiB");
    }

    #[test]
    fn one_of_a_thing_is_singular() {
        assert_eq!(count(1, "token"), "1 token");
        assert_eq!(count(0, "token"), "0 tokens");
        assert_eq!(count(3, "run"), "3 runs");
    }
}
