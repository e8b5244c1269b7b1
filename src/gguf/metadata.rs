//! Typed metadata getters on [`GgufFile`]. Each `get_*_opt` returns `Ok(None)` for an absent key
//! and an error naming the key for a value of the wrong type or range; each `get_*` also treats
//! an absent key as an error.

use super::error::GgufError;
use super::reader::GgufFile;
use super::value::{MetaArray, MetaValue};

impl GgufFile {
    /// Any integer type whose value fits in u64.
    pub fn get_u64_opt(&self, key: &str) -> Result<Option<u64>, GgufError> {
        self.integer_opt(key, "u64")
    }

    /// Any integer type whose value fits in u32.
    pub fn get_u32_opt(&self, key: &str) -> Result<Option<u32>, GgufError> {
        self.integer_opt(key, "u32")
    }

    /// Any integer type whose value fits in i64.
    pub fn get_i64_opt(&self, key: &str) -> Result<Option<i64>, GgufError> {
        self.integer_opt(key, "i64")
    }

    /// An f32, or an f64 narrowed to f32.
    pub fn get_f32_opt(&self, key: &str) -> Result<Option<f32>, GgufError> {
        self.typed_opt(key, "f32 or f64", |value| match *value {
            MetaValue::F32(v) => Some(v),
            MetaValue::F64(v) => Some(v as f32),
            _ => None,
        })
    }

    pub fn get_bool_opt(&self, key: &str) -> Result<Option<bool>, GgufError> {
        self.typed_opt(key, "bool", |value| match *value {
            MetaValue::Bool(v) => Some(v),
            _ => None,
        })
    }

    pub fn get_str_opt(&self, key: &str) -> Result<Option<&str>, GgufError> {
        self.typed_opt(key, "string", |value| match value {
            MetaValue::Str(v) => Some(v.as_str()),
            _ => None,
        })
    }

    pub fn get_array_opt(&self, key: &str) -> Result<Option<&MetaArray>, GgufError> {
        self.typed_opt(key, "array", |value| match value {
            MetaValue::Array(v) => Some(v),
            _ => None,
        })
    }

    pub fn get_str_array_opt(&self, key: &str) -> Result<Option<&[String]>, GgufError> {
        self.typed_opt(key, "array of string", |value| match value {
            MetaValue::Array(MetaArray::Str(v)) => Some(v.as_slice()),
            _ => None,
        })
    }

    pub fn get_f32_array_opt(&self, key: &str) -> Result<Option<&[f32]>, GgufError> {
        self.typed_opt(key, "array of f32", |value| match value {
            MetaValue::Array(MetaArray::F32(v)) => Some(v.as_slice()),
            _ => None,
        })
    }

    /// An array of any integer type whose elements all fit in i32.
    pub fn get_i32_array_opt(&self, key: &str) -> Result<Option<Vec<i32>>, GgufError> {
        self.integer_array_opt(key, "i32")
    }

    /// An array of any integer type whose elements all fit in u32.
    pub fn get_u32_array_opt(&self, key: &str) -> Result<Option<Vec<u32>>, GgufError> {
        self.integer_array_opt(key, "u32")
    }

    pub fn get_u64(&self, key: &str) -> Result<u64, GgufError> {
        required(key, self.get_u64_opt(key))
    }

    pub fn get_u32(&self, key: &str) -> Result<u32, GgufError> {
        required(key, self.get_u32_opt(key))
    }

    pub fn get_i64(&self, key: &str) -> Result<i64, GgufError> {
        required(key, self.get_i64_opt(key))
    }

    pub fn get_f32(&self, key: &str) -> Result<f32, GgufError> {
        required(key, self.get_f32_opt(key))
    }

    pub fn get_bool(&self, key: &str) -> Result<bool, GgufError> {
        required(key, self.get_bool_opt(key))
    }

    pub fn get_str(&self, key: &str) -> Result<&str, GgufError> {
        required(key, self.get_str_opt(key))
    }

    pub fn get_array(&self, key: &str) -> Result<&MetaArray, GgufError> {
        required(key, self.get_array_opt(key))
    }

    pub fn get_str_array(&self, key: &str) -> Result<&[String], GgufError> {
        required(key, self.get_str_array_opt(key))
    }

    pub fn get_f32_array(&self, key: &str) -> Result<&[f32], GgufError> {
        required(key, self.get_f32_array_opt(key))
    }

    pub fn get_i32_array(&self, key: &str) -> Result<Vec<i32>, GgufError> {
        required(key, self.get_i32_array_opt(key))
    }

    pub fn get_u32_array(&self, key: &str) -> Result<Vec<u32>, GgufError> {
        required(key, self.get_u32_array_opt(key))
    }

    fn typed_opt<'a, T>(
        &'a self,
        key: &str,
        expected: &'static str,
        extract: impl FnOnce(&'a MetaValue) -> Option<T>,
    ) -> Result<Option<T>, GgufError> {
        let Some(value) = self.get(key) else {
            return Ok(None);
        };
        extract(value)
            .map(Some)
            .ok_or_else(|| GgufError::WrongType {
                key: key.to_string(),
                expected,
                found: value.describe(),
            })
    }

    fn integer_opt<T: TryFrom<i128>>(
        &self,
        key: &str,
        target: &'static str,
    ) -> Result<Option<T>, GgufError> {
        let Some(wide) = self.typed_opt(key, "an integer", MetaValue::as_integer)? else {
            return Ok(None);
        };
        T::try_from(wide)
            .map(Some)
            .map_err(|_| out_of_range(key, wide, target))
    }

    fn integer_array_opt<T: TryFrom<i128>>(
        &self,
        key: &str,
        target: &'static str,
    ) -> Result<Option<Vec<T>>, GgufError> {
        let Some(array) = self.get_array_opt(key)? else {
            return Ok(None);
        };
        match array.integers() {
            Some(Ok(values)) => Ok(Some(values)),
            Some(Err(wide)) => Err(out_of_range(key, wide, target)),
            None => Err(GgufError::WrongType {
                key: key.to_string(),
                expected: "array of integers",
                found: array.describe(),
            }),
        }
    }
}

fn required<T>(key: &str, value: Result<Option<T>, GgufError>) -> Result<T, GgufError> {
    value?.ok_or_else(|| GgufError::MissingKey {
        key: key.to_string(),
    })
}

fn out_of_range(key: &str, value: i128, target: &'static str) -> GgufError {
    GgufError::OutOfRange {
        key: key.to_string(),
        value: value.to_string(),
        target,
    }
}
