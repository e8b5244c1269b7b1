//! Metadata values: the 13 GGUF value types, scalars and (possibly nested) arrays.

/// A GGUF metadata value type, with the id the file stores.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ValueType {
    U8,
    I8,
    U16,
    I16,
    U32,
    I32,
    F32,
    Bool,
    Str,
    Array,
    U64,
    I64,
    F64,
}

/// Value types in id order: `ALL[id]` is the type with that id.
const ALL: [ValueType; 13] = [
    ValueType::U8,
    ValueType::I8,
    ValueType::U16,
    ValueType::I16,
    ValueType::U32,
    ValueType::I32,
    ValueType::F32,
    ValueType::Bool,
    ValueType::Str,
    ValueType::Array,
    ValueType::U64,
    ValueType::I64,
    ValueType::F64,
];

impl ValueType {
    pub fn from_id(id: u32) -> Option<ValueType> {
        ALL.get(usize::try_from(id).ok()?).copied()
    }

    pub fn id(self) -> u32 {
        self as u32
    }

    pub fn name(self) -> &'static str {
        match self {
            ValueType::U8 => "u8",
            ValueType::I8 => "i8",
            ValueType::U16 => "u16",
            ValueType::I16 => "i16",
            ValueType::U32 => "u32",
            ValueType::I32 => "i32",
            ValueType::F32 => "f32",
            ValueType::Bool => "bool",
            ValueType::Str => "string",
            ValueType::Array => "array",
            ValueType::U64 => "u64",
            ValueType::I64 => "i64",
            ValueType::F64 => "f64",
        }
    }

    /// The fewest bytes one value of this type occupies in a file, which bounds how many of them
    /// the rest of a file can hold before anything is allocated for them.
    pub(super) fn min_encoded_size(self) -> u64 {
        match self {
            ValueType::U8 | ValueType::I8 | ValueType::Bool => 1,
            ValueType::U16 | ValueType::I16 => 2,
            ValueType::U32 | ValueType::I32 | ValueType::F32 => 4,
            ValueType::U64 | ValueType::I64 | ValueType::F64 => 8,
            // u64 length
            ValueType::Str => 8,
            // u32 element type + u64 count
            ValueType::Array => 12,
        }
    }
}

/// One metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum MetaValue {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    Str(String),
    Array(MetaArray),
    U64(u64),
    I64(i64),
    F64(f64),
}

/// A metadata array, stored as one vector of its element type so that large arrays (a 248k-entry
/// vocabulary) cost one allocation per string and none per number.
#[derive(Clone, Debug, PartialEq)]
pub enum MetaArray {
    U8(Vec<u8>),
    I8(Vec<i8>),
    U16(Vec<u16>),
    I16(Vec<i16>),
    U32(Vec<u32>),
    I32(Vec<i32>),
    F32(Vec<f32>),
    Bool(Vec<bool>),
    Str(Vec<String>),
    Array(Vec<MetaArray>),
    U64(Vec<u64>),
    I64(Vec<i64>),
    F64(Vec<f64>),
}

impl MetaValue {
    pub fn value_type(&self) -> ValueType {
        match self {
            MetaValue::U8(_) => ValueType::U8,
            MetaValue::I8(_) => ValueType::I8,
            MetaValue::U16(_) => ValueType::U16,
            MetaValue::I16(_) => ValueType::I16,
            MetaValue::U32(_) => ValueType::U32,
            MetaValue::I32(_) => ValueType::I32,
            MetaValue::F32(_) => ValueType::F32,
            MetaValue::Bool(_) => ValueType::Bool,
            MetaValue::Str(_) => ValueType::Str,
            MetaValue::Array(_) => ValueType::Array,
            MetaValue::U64(_) => ValueType::U64,
            MetaValue::I64(_) => ValueType::I64,
            MetaValue::F64(_) => ValueType::F64,
        }
    }

    /// The value of any integer type, widened so every one fits; None for other types.
    pub fn as_integer(&self) -> Option<i128> {
        match *self {
            MetaValue::U8(v) => Some(v.into()),
            MetaValue::I8(v) => Some(v.into()),
            MetaValue::U16(v) => Some(v.into()),
            MetaValue::I16(v) => Some(v.into()),
            MetaValue::U32(v) => Some(v.into()),
            MetaValue::I32(v) => Some(v.into()),
            MetaValue::U64(v) => Some(v.into()),
            MetaValue::I64(v) => Some(v.into()),
            _ => None,
        }
    }

    /// A description for error messages, e.g. "string" or "array of u32 (3 elements)".
    pub fn describe(&self) -> String {
        match self {
            MetaValue::Array(array) => array.describe(),
            other => other.value_type().name().to_string(),
        }
    }
}

impl MetaArray {
    pub fn element_type(&self) -> ValueType {
        match self {
            MetaArray::U8(_) => ValueType::U8,
            MetaArray::I8(_) => ValueType::I8,
            MetaArray::U16(_) => ValueType::U16,
            MetaArray::I16(_) => ValueType::I16,
            MetaArray::U32(_) => ValueType::U32,
            MetaArray::I32(_) => ValueType::I32,
            MetaArray::F32(_) => ValueType::F32,
            MetaArray::Bool(_) => ValueType::Bool,
            MetaArray::Str(_) => ValueType::Str,
            MetaArray::Array(_) => ValueType::Array,
            MetaArray::U64(_) => ValueType::U64,
            MetaArray::I64(_) => ValueType::I64,
            MetaArray::F64(_) => ValueType::F64,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            MetaArray::U8(v) => v.len(),
            MetaArray::I8(v) => v.len(),
            MetaArray::U16(v) => v.len(),
            MetaArray::I16(v) => v.len(),
            MetaArray::U32(v) => v.len(),
            MetaArray::I32(v) => v.len(),
            MetaArray::F32(v) => v.len(),
            MetaArray::Bool(v) => v.len(),
            MetaArray::Str(v) => v.len(),
            MetaArray::Array(v) => v.len(),
            MetaArray::U64(v) => v.len(),
            MetaArray::I64(v) => v.len(),
            MetaArray::F64(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn describe(&self) -> String {
        format!(
            "array of {} ({} elements)",
            self.element_type().name(),
            self.len()
        )
    }

    /// The elements converted to `T` when this is an array of integers: `Some(Err(v))` names the
    /// first element `v` that does not fit, `None` means the elements are not integers.
    pub fn integers<T: TryFrom<i128>>(&self) -> Option<Result<Vec<T>, i128>> {
        fn convert<S: Copy + Into<i128>, T: TryFrom<i128>>(values: &[S]) -> Result<Vec<T>, i128> {
            values
                .iter()
                .map(|&v| {
                    let wide = v.into();
                    T::try_from(wide).map_err(|_| wide)
                })
                .collect()
        }
        Some(match self {
            MetaArray::U8(v) => convert(v),
            MetaArray::I8(v) => convert(v),
            MetaArray::U16(v) => convert(v),
            MetaArray::I16(v) => convert(v),
            MetaArray::U32(v) => convert(v),
            MetaArray::I32(v) => convert(v),
            MetaArray::U64(v) => convert(v),
            MetaArray::I64(v) => convert(v),
            _ => return None,
        })
    }
}

impl MetaValue {
    /// The alignment a [`super::ALIGNMENT_KEY`] value sets: an unsigned 32-bit power of two
    /// (ggml stores it as u32; any integer type holding such a value is accepted).
    pub(super) fn as_alignment(&self) -> Result<u64, super::error::GgufError> {
        let bad = || super::error::GgufError::BadAlignment {
            found: format!("{self:?}"),
        };
        let alignment = self.as_integer().ok_or_else(bad)?;
        let alignment = u32::try_from(alignment).map_err(|_| bad())?;
        if alignment.is_power_of_two() {
            Ok(u64::from(alignment))
        } else {
            Err(bad())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_ids_follow_the_gguf_numbering() {
        for (id, ty) in ALL.iter().enumerate() {
            assert_eq!(ValueType::from_id(id as u32), Some(*ty));
            assert_eq!(ty.id() as usize, id);
        }
        assert_eq!(ValueType::from_id(13), None);
        assert_eq!(ValueType::from_id(u32::MAX), None);
        assert_eq!(ValueType::Str.id(), 8);
        assert_eq!(ValueType::F64.id(), 12);
    }

    #[test]
    fn integer_arrays_convert_with_range_checks() {
        let array = MetaArray::I64(vec![3, -1]);
        assert_eq!(array.integers::<i32>(), Some(Ok(vec![3, -1])));
        assert_eq!(array.integers::<u32>(), Some(Err(-1)));
        assert_eq!(MetaArray::F32(vec![1.0]).integers::<i32>(), None);
    }
}
