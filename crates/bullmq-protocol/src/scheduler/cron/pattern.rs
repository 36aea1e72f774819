//! Cron pattern text to field values, with cron-parser 5's grammar, quirks and error messages.
//!
//! The quirks are kept on purpose: Node BullMQ accepts exactly what cron-parser accepts, and a
//! scheduler written by one client must be read the same way by the other. Among them: fewer
//! than five fields are padded from the left (`5` is "every minute on Fridays"), `*-5` reads as
//! `*`, a step from a single value runs to the field's maximum (`1/2` in day of week is
//! `1-7/2`, which also matches Sunday as 7), duplicate values are an error (`0,7` in day of
//! week), month and weekday names are accepted in both fields, and `5L`/`15L` keep only their
//! first digit as the weekday of "last weekday of the month".

/// The `@` aliases, expanded to six-field patterns.
const PREDEFINED: [(&str, &str); 10] = [
    ("@yearly", "0 0 0 1 1 *"),
    ("@annually", "0 0 0 1 1 *"),
    ("@monthly", "0 0 0 1 * *"),
    ("@weekly", "0 0 0 * * 0"),
    ("@daily", "0 0 0 * * *"),
    ("@hourly", "0 0 * * * *"),
    ("@minutely", "0 * * * * *"),
    ("@secondly", "* * * * * *"),
    ("@weekdays", "0 0 0 * * 1-5"),
    ("@weekends", "0 0 0 * * 0,6"),
];

/// Month and weekday names; cron-parser resolves either kind in both fields.
const NAMES: [(&str, u32); 19] = [
    ("jan", 1),
    ("feb", 2),
    ("mar", 3),
    ("apr", 4),
    ("may", 5),
    ("jun", 6),
    ("jul", 7),
    ("aug", 8),
    ("sep", 9),
    ("oct", 10),
    ("nov", 11),
    ("dec", 12),
    ("sun", 0),
    ("mon", 1),
    ("tue", 2),
    ("wed", 3),
    ("thu", 4),
    ("fri", 5),
    ("sat", 6),
];

const MAX_FIELD_VALUES: usize = 256;
const MAX_EXPRESSION_LENGTH: usize = 1024;
/// Days per month with February at 29, as cron-parser checks an explicit day of month.
const DAYS_IN_MONTH: [u32; 12] = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/// A parsed pattern: what the iteration in `cron.rs` matches against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Fields {
    /// Sorted allowed values of each plain field.
    pub(super) second: Vec<u32>,
    pub(super) minute: Vec<u32>,
    pub(super) hour: Vec<u32>,
    pub(super) month: Vec<u32>,
    pub(super) day_of_month: DayOfMonth,
    pub(super) day_of_week: DayOfWeek,
}

/// The day-of-month field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct DayOfMonth {
    /// Numeric days.
    pub(super) days: Vec<u32>,
    /// The raw field contains `L`: the last day of the month matches too.
    pub(super) last: bool,
    /// The raw field is exactly `*` or `?` (then the day-of-week field alone decides).
    pub(super) wildcard: bool,
}

/// The day-of-week field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct DayOfWeek {
    /// Numeric weekdays, 0–7 (7 only survives from ranges, and never matches: 0 is Sunday).
    pub(super) days: Vec<u32>,
    /// The raw field contains `L`.
    pub(super) last: bool,
    /// Weekdays that match in the month's last seven days when `last`: the first digit of every
    /// value, numeric or not, modulo 7 (cron-parser's reading of `5L`).
    pub(super) last_days: Vec<u32>,
    /// `n` of `d#n` (1–5), or 0.
    pub(super) nth: u32,
    /// The raw field is exactly `*` or `?`.
    pub(super) wildcard: bool,
}

/// One field's kind: bounds, extra characters and the name in cron-parser's messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    Second,
    Minute,
    Hour,
    DayOfMonth,
    Month,
    DayOfWeek,
}

impl Unit {
    fn bounds(self) -> (i64, i64) {
        match self {
            Self::Second | Self::Minute => (0, 59),
            Self::Hour => (0, 23),
            Self::DayOfMonth => (1, 31),
            Self::Month => (1, 12),
            Self::DayOfWeek => (0, 7),
        }
    }
    /// Whether `L` may appear (cron-parser's `chars`).
    fn allows_last(self) -> bool {
        matches!(self, Self::DayOfMonth | Self::DayOfWeek)
    }
    fn valid_char(self, c: char) -> bool {
        c.is_ascii_digit()
            || matches!(c, '?' | ',' | '*' | 'H' | '/' | '-')
            || (c == 'L' && self.allows_last())
            || (c == '#' && self == Self::DayOfWeek)
    }
    /// cron-parser's `CronUnit` name.
    fn unit_name(self) -> &'static str {
        match self {
            Self::Second => "Second",
            Self::Minute => "Minute",
            Self::Hour => "Hour",
            Self::DayOfMonth => "DayOfMonth",
            Self::Month => "Month",
            Self::DayOfWeek => "DayOfWeek",
        }
    }
    /// cron-parser's field class name, in validation messages.
    fn class_name(self) -> &'static str {
        match self {
            Self::Second => "CronSecond",
            Self::Minute => "CronMinute",
            Self::Hour => "CronHour",
            Self::DayOfMonth => "CronDayOfMonth",
            Self::Month => "CronMonth",
            Self::DayOfWeek => "CronDayOfWeek",
        }
    }
}

/// One value of a field: a number, or a string holding `L` (`L`, `15L`, `5L`).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Value {
    Num(i64),
    Last(String),
}

/// JavaScript's `parseInt(s, 10)` on the characters a field may hold: an optional sign and the
/// leading digits; `None` is NaN.
fn js_parse_int(s: &str) -> Option<i64> {
    let (negative, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let end = digits
        .bytes()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(digits.len());
    if end == 0 {
        return None;
    }
    // Saturate: any value this large is out of every field's range anyway.
    let value = digits[..end].parse::<i64>().unwrap_or(i64::MAX / 2);
    Some(if negative { -value } else { value })
}

fn nan_or(value: Option<i64>) -> String {
    value.map_or_else(|| "NaN".to_owned(), |v| v.to_string())
}

/// Parses `expression` as `CronExpressionParser.parse` does (non-strict, as BullMQ calls it).
/// The error is cron-parser's message.
pub(super) fn parse(expression: &str) -> Result<Fields, String> {
    let expression = PREDEFINED
        .iter()
        .find(|(alias, _)| *alias == expression)
        .map_or(expression, |(_, expanded)| expanded);
    let raw = raw_fields(expression)?;
    let [second, minute, hour, day_of_month, month, day_of_week] = raw;

    let second_values = parse_field(Unit::Second, second)?;
    let minute_values = parse_field(Unit::Minute, minute)?;
    let hour_values = parse_field(Unit::Hour, hour)?;
    let month_values = parse_field(Unit::Month, month)?;
    let dom_values = parse_field(Unit::DayOfMonth, day_of_month)?;
    let (dow_text, nth) = parse_nth_day(day_of_week)?;
    let dow_values = parse_field(Unit::DayOfWeek, dow_text)?;

    // The field objects validate in this order (cron-parser's constructor calls).
    let second = numbers(validate(Unit::Second, second_values)?);
    let minute = numbers(validate(Unit::Minute, minute_values)?);
    let hour = numbers(validate(Unit::Hour, hour_values)?);
    let month_numbers: Vec<i64> = month_values
        .iter()
        .filter_map(|v| match v {
            Value::Num(n) => Some(*n),
            Value::Last(_) => None,
        })
        .collect();
    let dom_values = validate(
        Unit::DayOfMonth,
        restrict_to_month(&month_numbers, dom_values),
    )?;
    let month = numbers(validate(Unit::Month, month_values)?);
    let dow_values = validate(Unit::DayOfWeek, dow_values)?;
    if dow_values
        .iter()
        .any(|v| matches!(v, Value::Last(s) if s == "L"))
    {
        return Err("CronDayOfWeek Validation error, unexpected standalone L".to_owned());
    }

    let day_of_month = DayOfMonth {
        last: day_of_month.contains('L'),
        wildcard: matches!(day_of_month, "*" | "?"),
        days: numbers(dom_values.clone()),
    };
    let day_of_week = DayOfWeek {
        last: day_of_week.contains('L'),
        last_days: dow_values
            .iter()
            .filter_map(|v| {
                let text = match v {
                    Value::Num(n) => n.to_string(),
                    Value::Last(s) => s.clone(),
                };
                text.chars().next()?.to_digit(10).map(|d| d % 7)
            })
            .collect(),
        nth,
        wildcard: matches!(day_of_week, "*" | "?"),
        days: numbers(dow_values),
    };

    // An explicit day that a single month never has is refused, unless `L` or a weekday can
    // still match.
    if month.len() == 1 && !day_of_month.last && day_of_week.wildcard {
        let first_day = dom_values.first().and_then(|v| match v {
            Value::Num(n) => Some(*n),
            Value::Last(s) => js_parse_int(s),
        });
        let limit = i64::from(DAYS_IN_MONTH[month[0] as usize - 1]);
        if first_day.is_none_or(|d| d > limit) {
            return Err("Invalid explicit day of month definition".to_owned());
        }
    }

    Ok(Fields {
        second,
        minute,
        hour,
        month,
        day_of_month,
        day_of_week,
    })
}

/// Splits the expression into six raw fields, padding missing leading ones with `0 * * * *`.
fn raw_fields(expression: &str) -> Result<[&str; 6], String> {
    let expression = if expression.is_empty() {
        "0 * * * * *"
    } else {
        expression
    };
    if expression.encode_utf16().count() > MAX_EXPRESSION_LENGTH {
        return Err(format!(
            "Invalid cron expression, too long, expected at most {MAX_EXPRESSION_LENGTH} characters"
        ));
    }
    // JavaScript's `trim()` and `\s` also cover U+FEFF, which Rust's whitespace does not.
    let is_space = |c: char| c.is_whitespace() || c == '\u{feff}';
    let trimmed = expression.trim_matches(is_space);
    let atoms: Vec<&str> = if trimmed.is_empty() {
        vec![""]
    } else {
        trimmed.split(is_space).filter(|a| !a.is_empty()).collect()
    };
    if atoms.len() > 6 {
        return Err("Invalid cron expression, too many fields".to_owned());
    }
    let defaults = ["0", "*", "*", "*", "*", "*"];
    let mut fields = defaults;
    let missing = 6 - atoms.len();
    fields[missing..].copy_from_slice(&atoms);
    Ok(fields)
}

/// Splits `d#n` into the weekday text and `n`.
fn parse_nth_day(raw: &str) -> Result<(&str, u32), String> {
    let atoms: Vec<&str> = raw.split('#').collect();
    if atoms.len() <= 1 {
        return Ok((raw, 0));
    }
    if let Some(c) = raw.chars().find(|c| matches!(c, ',' | '-' | '/')) {
        return Err(format!(
            "Constraint error, invalid dayOfWeek `#` and `{c}` special characters are incompatible"
        ));
    }
    // `+"..."` in JavaScript: digits only (an empty string would be 0, refused below).
    let nth = atoms[atoms.len() - 1];
    let nth = if nth.bytes().all(|b| b.is_ascii_digit()) {
        nth.parse::<u32>().unwrap_or(0)
    } else {
        0
    };
    if atoms.len() > 2 || !(1..=5).contains(&nth) {
        return Err("Constraint error, invalid dayOfWeek occurrence number (#)".to_owned());
    }
    Ok((atoms[0], nth))
}

fn parse_field(unit: Unit, raw: &str) -> Result<Vec<Value>, String> {
    let value = if matches!(unit, Unit::Month | Unit::DayOfWeek) {
        replace_names(raw)?
    } else {
        raw.to_owned()
    };
    if value.is_empty() || !value.chars().all(|c| unit.valid_char(c)) {
        return Err(format!("Invalid characters, got value: {value}"));
    }
    if value.contains('H') {
        // cron-parser draws hashed values from a generator seeded at random on every parse
        // unless a `hashSeed` option is given, which BullMQ never passes: Node's next run
        // would be random on every evaluation, so there is nothing deterministic to match.
        return Err(format!(
            "Hashed values (H) are not supported, got value: {value}"
        ));
    }
    let (min, max) = unit.bounds();
    let value = value.replace(['*', '?'], &format!("{min}-{max}"));
    parse_sequence(unit, &value)
}

/// Replaces every run of three ASCII letters with its month or weekday number, left to right.
fn replace_names(raw: &str) -> Result<String, String> {
    let chars: Vec<char> = raw.chars().collect();
    let mut out = String::with_capacity(raw.len());
    let mut i = 0;
    while i < chars.len() {
        if i + 3 <= chars.len() && chars[i..i + 3].iter().all(char::is_ascii_alphabetic) {
            let name: String = chars[i..i + 3]
                .iter()
                .collect::<String>()
                .to_ascii_lowercase();
            let number = NAMES
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, number)| *number)
                .ok_or_else(|| format!("Validation error, cannot resolve alias \"{name}\""))?;
            out.push_str(&number.to_string());
            i += 3;
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    Ok(out)
}

fn parse_sequence(unit: Unit, value: &str) -> Result<Vec<Value>, String> {
    let (min, max) = unit.bounds();
    let mut stack = Vec::new();
    for atom in value.split(',') {
        if stack.len() > MAX_FIELD_VALUES {
            return Err(format!(
                "Constraint error, too many values in {} field, expected at most {MAX_FIELD_VALUES}",
                unit.unit_name()
            ));
        }
        if atom.is_empty() {
            return Err("Invalid list value format".to_owned());
        }
        match parse_repeat(unit, atom)? {
            Atom::Range(values) => stack.extend(values.into_iter().map(Value::Num)),
            Atom::Single(text) => {
                if unit.allows_last() && text.contains('L') {
                    stack.push(Value::Last(text));
                    continue;
                }
                let shown = if text.bytes().all(|b| b.is_ascii_digit()) {
                    // `${+val}` prints the number without leading zeros.
                    js_parse_int(&text).map_or(text.clone(), |n| n.to_string())
                } else {
                    text.clone()
                };
                match js_parse_int(&text) {
                    Some(v) if (min..=max).contains(&v) => {
                        stack.push(Value::Num(if unit == Unit::DayOfWeek { v % 7 } else { v }));
                    }
                    _ => {
                        return Err(format!(
                            "Constraint error, got value {shown} expected range {min}-{max}"
                        ))
                    }
                }
            }
        }
    }
    Ok(stack)
}

/// A list element: a range's values, or one value as text.
enum Atom {
    Range(Vec<i64>),
    Single(String),
}

fn parse_repeat(unit: Unit, atom: &str) -> Result<Atom, String> {
    let parts: Vec<&str> = atom.split('/').collect();
    match parts.as_slice() {
        [single] => parse_range(unit, single, Some(1)),
        [range, step] => {
            let (_, max) = unit.bounds();
            let range = if range.contains('-') {
                (*range).to_owned()
            } else {
                format!("{range}-{max}")
            };
            parse_range(unit, &range, js_parse_int(step))
        }
        _ => Err(format!("Invalid repeat: {atom}")),
    }
}

fn parse_range(unit: Unit, text: &str, step: Option<i64>) -> Result<Atom, String> {
    let parts: Vec<&str> = text.split('-').collect();
    if parts.len() <= 1 {
        return Ok(Atom::Single(text.to_owned()));
    }
    let (cmin, cmax) = unit.bounds();
    let (lo, hi) = (js_parse_int(parts[0]), js_parse_int(parts[1]));
    let (lo, hi) = match (lo, hi) {
        (Some(lo), Some(hi)) if lo >= cmin && hi <= cmax => (lo, hi),
        _ => {
            return Err(format!(
                "Constraint error, got range {}-{} expected range {cmin}-{cmax}",
                nan_or(lo),
                nan_or(hi)
            ))
        }
    };
    if lo > hi {
        return Err(format!("Invalid range: {lo}-{hi}, min({lo}) > max({hi})"));
    }
    let step = match step {
        Some(step) if step > 0 => step,
        _ => {
            return Err(format!(
                "Constraint error, cannot repeat at every {} time.",
                nan_or(step)
            ))
        }
    };
    let mut values = Vec::new();
    // A weekday range reaching 7 on its step also yields Sunday as 0.
    if unit == Unit::DayOfWeek && hi % 7 == 0 && (hi - lo) % step == 0 {
        values.push(0);
    }
    let mut v = lo;
    while v <= hi {
        if !values.contains(&v) {
            values.push(v);
        }
        v += step;
    }
    Ok(Atom::Range(values))
}

/// cron-parser's `CronDayOfMonth.fromMonth`: with a single month, days it never has are dropped
/// (unless none would remain).
fn restrict_to_month(months: &[i64], days: Vec<Value>) -> Vec<Value> {
    let [month] = months else {
        return days;
    };
    let limit = i64::from(DAYS_IN_MONTH[*month as usize - 1]);
    let kept: Vec<Value> = days
        .iter()
        .filter(|v| !matches!(v, Value::Num(n) if *n > limit))
        .cloned()
        .collect();
    if kept.is_empty() {
        days
    } else {
        kept
    }
}

/// cron-parser's `CronField` constructor and `validate`: sorts (numbers first), checks the
/// `L` forms and refuses duplicates.
fn validate(unit: Unit, mut values: Vec<Value>) -> Result<Vec<Value>, String> {
    if values.is_empty() {
        return Err(format!(
            "{} Validation error, values contains no values",
            unit.class_name()
        ));
    }
    values.sort_by(|a, b| match (a, b) {
        (Value::Num(a), Value::Num(b)) => a.cmp(b),
        (Value::Last(a), Value::Last(b)) => a.cmp(b),
        (Value::Num(_), Value::Last(_)) => std::cmp::Ordering::Less,
        (Value::Last(_), Value::Num(_)) => std::cmp::Ordering::Greater,
    });
    let (min, max) = unit.bounds();
    for value in &values {
        let ok = match value {
            Value::Num(n) => (min..=max).contains(n),
            Value::Last(s) => {
                let digits = &s[..s.len() - 1];
                unit.allows_last()
                    && s.ends_with('L')
                    && digits.len() <= 2
                    && digits.bytes().all(|b| b.is_ascii_digit())
            }
        };
        if !ok {
            let shown = match value {
                Value::Num(n) => n.to_string(),
                Value::Last(s) => s.clone(),
            };
            let chars = if unit.allows_last() {
                " or chars L"
            } else {
                ""
            };
            return Err(format!(
                "{} Validation error, got value {shown} expected range {min}-{max}{chars}",
                unit.class_name()
            ));
        }
    }
    if let Some(duplicate) = values
        .iter()
        .enumerate()
        .find(|(i, v)| values[..*i].contains(v))
        .map(|(_, v)| v)
    {
        let shown = match duplicate {
            Value::Num(n) => n.to_string(),
            Value::Last(s) => s.clone(),
        };
        return Err(format!(
            "{} Validation error, duplicate values found: {shown}",
            unit.class_name()
        ));
    }
    Ok(values)
}

/// The numeric values (already sorted and within 0–59).
fn numbers(values: Vec<Value>) -> Vec<u32> {
    values
        .into_iter()
        .filter_map(|v| match v {
            Value::Num(n) => u32::try_from(n).ok(),
            Value::Last(_) => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_fields_get_second_zero_and_fewer_are_padded() {
        let f = parse("*/15 * * * *").unwrap();
        assert_eq!(f.second, vec![0]);
        assert_eq!(f.minute, vec![0, 15, 30, 45]);
        let f = parse("5").unwrap();
        assert_eq!(f.minute.len(), 60);
        assert_eq!(f.day_of_week.days, vec![5]);
    }

    #[test]
    fn weekday_quirks() {
        assert_eq!(
            parse("0 0 * * 1/2").unwrap().day_of_week.days,
            vec![0, 1, 3, 5, 7]
        );
        assert_eq!(parse("0 0 * * 7").unwrap().day_of_week.days, vec![0]);
        assert_eq!(parse("0 0 * * jan").unwrap().day_of_week.days, vec![1]);
        let f = parse("0 0 * * 1,15L").unwrap();
        assert!(f.day_of_week.last);
        assert_eq!(f.day_of_week.last_days, vec![1, 1]);
        assert_eq!(
            parse("0 0 * * 0,7").unwrap_err(),
            "CronDayOfWeek Validation error, duplicate values found: 0"
        );
    }

    #[test]
    fn explicit_days_a_month_never_has() {
        assert_eq!(parse("0 0 1,31 2 *").unwrap().day_of_month.days, vec![1]);
        assert!(parse("0 0 31 2 *").is_err());
        assert!(parse("0 0 31 2 1").is_ok());
    }

    #[test]
    fn js_parse_int_reads_leading_digits() {
        assert_eq!(js_parse_int("5L"), Some(5));
        assert_eq!(js_parse_int("-2"), Some(-2));
        assert_eq!(js_parse_int(""), None);
        assert_eq!(js_parse_int("L"), None);
    }
}
