//! Lenient number reading for option fields other clients may write loosely.
//!
//! Node always stores integers, but a job hash written by another client (or by hand) may hold
//! `"delay": 1500.0` or `"priority": -1`. Node would still run such a job (`delay > 0` is its
//! only test), so rather than rejecting the whole job we read finite floats truncated and
//! negative numbers as 0. `null` reads as absent. Anything else is an error.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserializer, Visitor};

/// `deserialize_with` for `Option<T>` integer fields (`T` = `u32` or `u64`).
pub(crate) fn opt_uint<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<u64>,
{
    deserializer.deserialize_any(UintVisitor(PhantomData))
}

struct UintVisitor<T>(PhantomData<T>);

impl<T: TryFrom<u64>> UintVisitor<T> {
    fn fit<E: de::Error>(v: u64) -> Result<Option<T>, E> {
        T::try_from(v)
            .map(Some)
            .map_err(|_| E::custom(format_args!("number {v} is too large")))
    }
}

impl<'de, T: TryFrom<u64>> Visitor<'de> for UintVisitor<T> {
    type Value = Option<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a non-negative integer")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Self::fit(v)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Self::fit(u64::try_from(v).unwrap_or(0))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        if !v.is_finite() {
            return Err(E::custom("number is not finite"));
        }
        if v <= 0.0 {
            return Self::fit(0);
        }
        if v >= u64::MAX as f64 {
            return Err(E::custom(format_args!("number {v} is too large")));
        }
        Self::fit(v.trunc() as u64)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}
