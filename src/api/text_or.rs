//! A JSON value that is either a string or an array of items: Anthropic's message content
//! and `system`, the Responses API's `input`, content and tool output. Read with a visitor
//! (not `#[serde(untagged)]`), so an error inside an item still names its field.

use std::fmt;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::{self, Deserializer, SeqAccess, Visitor};

/// A string, or an array of `T`.
#[derive(Debug, Clone, PartialEq)]
pub enum TextOr<T> {
    Text(String),
    Items(Vec<T>),
}

impl<T> Default for TextOr<T> {
    fn default() -> Self {
        Self::Text(String::new())
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for TextOr<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = TextOr<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string or an array")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(TextOr::Text(v.to_owned()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(TextOr::Text(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(TextOr::Items(items))
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::http::parse_body;

    #[derive(Debug, PartialEq, Deserialize)]
    struct Item {
        #[allow(dead_code)]
        n: u32,
    }

    #[derive(Debug, Deserialize)]
    struct Body {
        v: TextOr<Item>,
    }

    #[test]
    fn a_string_or_items_and_errors_inside_items_name_the_field() {
        let b: Body = parse_body(br#"{"v":"hi"}"#).unwrap();
        assert_eq!(b.v, TextOr::Text("hi".into()));
        let b: Body = parse_body(br#"{"v":[{"n":1},{"n":2}]}"#).unwrap();
        assert!(matches!(b.v, TextOr::Items(ref i) if i.len() == 2));
        let e = parse_body::<Body>(br#"{"v":[{"n":1},{"n":"x"}]}"#).unwrap_err();
        assert_eq!(e.path, "v[1].n");
        let e = parse_body::<Body>(br#"{"v":3}"#).unwrap_err();
        assert_eq!(e.path, "v");
    }
}
