//! The Redis Cluster hash tag of a key: the part that picks its slot.

/// The hash tag of `key` by Redis Cluster's rule: the text between the first `{` and the first
/// `}` after it, when that text is not empty; `None` when the whole key is hashed.
///
/// ```
/// use bullmq_protocol::flow::hash_tag;
/// assert_eq!(hash_tag("{bull}:emails:1"), Some("bull"));
/// assert_eq!(hash_tag("bull:{emails}:1"), Some("emails"));
/// assert_eq!(hash_tag("bull:emails:1"), None);
/// assert_eq!(hash_tag("{}:emails:{1}"), None); // the first `{` is followed by `}`
/// ```
pub fn hash_tag(key: &str) -> Option<&str> {
    let open = key.find('{')?;
    let rest = &key[open + 1..];
    let close = rest.find('}')?;
    if close == 0 {
        return None;
    }
    Some(&rest[..close])
}

#[cfg(test)]
mod tests {
    use super::hash_tag;

    #[test]
    fn the_first_brace_pair_with_text_inside_is_the_tag() {
        assert_eq!(hash_tag("{a}{b}"), Some("a"));
        assert_eq!(hash_tag("x{a:b}y"), Some("a:b"));
        assert_eq!(hash_tag("{{a}}"), Some("{a"));
    }

    #[test]
    fn no_tag_without_a_closing_brace_or_with_an_empty_pair() {
        assert_eq!(hash_tag("{abc"), None);
        assert_eq!(hash_tag("abc}"), None);
        assert_eq!(hash_tag("{}abc"), None);
        assert_eq!(hash_tag("{}{abc}"), None);
        assert_eq!(hash_tag(""), None);
    }

    #[test]
    fn a_closing_brace_before_the_opening_one_does_not_count() {
        assert_eq!(hash_tag("}x{tag}"), Some("tag"));
    }
}
