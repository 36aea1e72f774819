//! Decoding of script replies (nested arrays of integers and bulk strings).

use std::collections::HashMap;

use fred::prelude::Value;

use crate::error::{RedisError, Result};

pub(crate) fn unexpected(script: &'static str, detail: impl Into<String>) -> RedisError {
    RedisError::UnexpectedReply {
        script,
        detail: detail.into(),
    }
}

pub(crate) fn array(script: &'static str, value: Value) -> Result<Vec<Value>> {
    match value {
        Value::Array(items) => Ok(items),
        Value::Null => Ok(Vec::new()),
        other => Err(unexpected(
            script,
            format!("expected an array, got {other:?}"),
        )),
    }
}

pub(crate) fn string(script: &'static str, value: Value) -> Result<String> {
    match value {
        Value::String(s) => Ok(s.to_string()),
        Value::Bytes(b) => Ok(String::from_utf8_lossy(&b).into_owned()),
        Value::Integer(i) => Ok(i.to_string()),
        Value::Double(d) => Ok(d.to_string()),
        other => Err(unexpected(
            script,
            format!("expected a string, got {other:?}"),
        )),
    }
}

pub(crate) fn integer(script: &'static str, value: Value) -> Result<i64> {
    match value {
        Value::Integer(i) => Ok(i),
        Value::Double(d) => Ok(d as i64),
        Value::String(s) => s
            .parse()
            .map_err(|_| unexpected(script, format!("expected an integer, got {s:?}"))),
        other => Err(unexpected(
            script,
            format!("expected an integer, got {other:?}"),
        )),
    }
}

/// A job hash as text, or why it cannot be read as text: a field or value that is not UTF-8
/// (another client wrote bytes). Decoding such a value lossily would hand the processor data
/// nobody wrote, so the job is failed with the reason instead.
pub(crate) fn job_hash(
    script: &'static str,
    value: Value,
) -> Result<std::result::Result<HashMap<String, String>, String>> {
    let items = match value {
        Value::Map(map) => map
            .inner()
            .into_iter()
            .flat_map(|(field, value)| [Value::from(field), value])
            .collect(),
        other => array(script, other)?,
    };
    let mut map = HashMap::with_capacity(items.len() / 2);
    let mut iter = items.into_iter();
    while let (Some(field), Some(value)) = (iter.next(), iter.next()) {
        let field = match field {
            Value::Bytes(bytes) => match String::from_utf8(bytes.to_vec()) {
                Ok(text) => text,
                Err(_) => {
                    let shown = String::from_utf8_lossy(&bytes).into_owned();
                    return Ok(Err(format!(
                        "corrupted job hash: field name {shown:?} is not valid UTF-8"
                    )));
                }
            },
            other => string(script, other)?,
        };
        let value = match value {
            Value::Bytes(bytes) => match String::from_utf8(bytes.to_vec()) {
                Ok(text) => text,
                Err(_) => {
                    return Ok(Err(format!(
                        "corrupted job hash: {field} is not valid UTF-8"
                    )))
                }
            },
            other => string(script, other)?,
        };
        map.insert(field, value);
    }
    Ok(Ok(map))
}

pub(crate) fn strings(script: &'static str, value: Value) -> Result<Vec<String>> {
    array(script, value)?
        .into_iter()
        .map(|v| string(script, v))
        .collect()
}
