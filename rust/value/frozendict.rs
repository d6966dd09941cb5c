//! `FrozenDict`: an immutable, hashable, insertion-ordered mapping of `str` keys to frozen JSON
//! values, with the semantics of PEP 814's builtin `frozendict`.
//!
//! Entries are stored in the object itself (up to 4 of them without any further allocation, more
//! in one heap slice: `frozendict/entries.rs`), like a small struct: a JSON object is usually a
//! handful of keys, so freezing one costs one allocation and a lookup is a short scan. Mappings
//! too large to scan get a private lookup `dict`, built on the first lookup. Nothing ever hands out a mutable container: every value is
//! deep-frozen on the way in (the constructor freezes), which is what lets `freeze` return an
//! existing `FrozenDict` as it is.

mod entries;

use std::sync::atomic::{AtomicIsize, Ordering};

use pyo3::exceptions::{PyKeyError, PyTypeError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::pyclass::CompareOp;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyAny, PyDict, PyFrozenSet, PyMapping, PyString, PyTuple, PyType};
use pyo3::Borrowed;

use crate::value::freeze::freeze_at;
use crate::value::walk::{is_mapping, untrack, STACK_GROWTH, STACK_RED_ZONE};

use entries::Entries;
pub(crate) use entries::EntriesBuilder;

/// Lookups scan at most this many entries; larger mappings build a lookup dict once.
const SCAN_MAX: usize = 8;
/// `hash` before the first `__hash__`: no Python hash is -1 (it signals an error in C).
const UNHASHED: isize = -1;

impl EntriesBuilder {
    pub(crate) fn build<'py>(self, py: Python<'py>, depth: usize) -> Bound<'py, FrozenDict> {
        let frozen = FrozenDict {
            entries: self.finish(depth as u16), // never above MAX_DEPTH
            hash: AtomicIsize::new(UNHASHED),
        };
        let frozen = Bound::new(py, frozen).expect("allocating a FrozenDict failed");
        untrack(frozen.as_any());
        frozen
    }
}

/// An immutable, hashable, insertion-ordered mapping of `str` keys to frozen JSON values.
#[pyclass(frozen, mapping, module = "dshkit._core", name = "FrozenDict")]
pub(crate) struct FrozenDict {
    /// The entries (in one of two size classes, `frozendict/entries.rs`) and the depth.
    entries: Entries,
    /// `hash(frozenset(self.items()))` once asked for, else `UNHASHED`.
    hash: AtomicIsize,
}

impl FrozenDict {
    /// A `FrozenDict` of a dict whose keys are exact `str` and whose values are already frozen.
    pub(crate) fn wrap<'py>(py: Python<'py>, dict: Bound<'py, PyDict>, depth: usize) -> Bound<'py, FrozenDict> {
        let mut builder = EntriesBuilder::with_capacity(dict.len());
        for (key, value) in dict.iter() {
            builder.push(key, value);
        }
        builder.build(py, depth)
    }

    /// Nesting depth of this mapping (1 + its deepest value): lets a frozen part be reused
    /// inside a new tree without walking it, while the depth limit still holds.
    pub(crate) fn depth(&self) -> usize {
        self.entries.depth() as usize
    }

    /// The cached hash, if computed.
    fn known_hash(&self) -> Option<isize> {
        Some(self.hash.load(Ordering::Relaxed)).filter(|&hash| hash != UNHASHED)
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.as_slice().len()
    }

    /// The entries in insertion order, borrowed.
    pub(crate) fn iter<'a, 'py>(
        &'a self,
        py: Python<'py>,
    ) -> impl Iterator<Item = (Borrowed<'a, 'py, PyAny>, Borrowed<'a, 'py, PyAny>)> + 'a
    where
        'py: 'a,
    {
        self.entries
            .as_slice()
            .iter()
            .map(move |&(key, value)| unsafe { (Borrowed::from_ptr(py, key), Borrowed::from_ptr(py, value)) })
    }

    /// A new plain `dict` with the same entries (values stay frozen).
    pub(crate) fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(py);
        for (key, value) in self.iter(py) {
            dict.set_item(key, value)?;
        }
        Ok(dict)
    }

    /// The lookup dict of a mapping too large to scan, built on first use (a small mapping, of
    /// inline entries, is always scanned: it gets a throwaway one).
    fn index<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let Some(index) = self.entries.index() else {
            return self.to_dict(py);
        };
        if let Some(index) = index.get() {
            return Ok(index.bind(py).clone());
        }
        let dict = self.to_dict(py)?;
        untrack(dict.as_any());
        Ok(index.get_or_init(|| dict.unbind()).bind(py).clone())
    }

    /// The value under `key` with `dict` semantics (an unhashable key is a `TypeError`).
    pub(crate) fn lookup<'py>(&self, py: Python<'py>, key: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let entries = self.entries.as_slice();
        if entries.len() <= SCAN_MAX && key.is_exact_instance_of::<PyString>() {
            let wanted = key.as_ptr();
            // Keys are often the very same (interned or cached) object: try identity first.
            if let Some(&(_, value)) = entries.iter().find(|(k, _)| *k == wanted) {
                return Ok(Some(unsafe { Bound::from_borrowed_ptr(py, value) }));
            }
            for &(k, value) in entries {
                if unsafe { ffi::PyUnicode_Compare(k, wanted) } == 0 {
                    return Ok(Some(unsafe { Bound::from_borrowed_ptr(py, value) }));
                }
            }
            return Ok(None);
        }
        self.index(py)?.get_item(key)
    }

    /// The value under the key with this text, or `None`: a scan that compares the keys' UTF-8
    /// text, for the few fixed keys the core itself reads (`"type"`, `"text"`, `"kind"`, ...).
    /// Inlined: with the key a literal, each comparison is a length test and a load or two
    /// instead of a call to `memcmp` per entry.
    #[inline(always)]
    pub(crate) fn get_str<'py>(&self, py: Python<'py>, key: &str) -> Option<Bound<'py, PyAny>> {
        self.entries.as_slice().iter().find_map(|&(k, value)| {
            // None: a lone surrogate, not one of our keys.
            let text = unsafe { crate::value::strs::str_utf8(k) }?;
            (text == key.as_bytes()).then(|| unsafe { Bound::from_borrowed_ptr(py, value) })
        })
    }

    /// Does every entry of `self` appear, equal, in `other` (a mapping of the same length)?
    fn entries_equal<'py>(
        &self,
        py: Python<'py>,
        mut other_get: impl FnMut(&Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyAny>>>,
    ) -> PyResult<bool> {
        for (key, value) in self.iter(py) {
            match other_get(&key)? {
                Some(theirs) if theirs.is(&*value) || value.eq(&theirs)? => {}
                _ => return Ok(false),
            }
        }
        Ok(true)
    }

    fn merged<'py>(
        py: Python<'py>,
        first: &Bound<'py, PyAny>,
        second: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let dict = PyDict::new(py);
        for part in [first, second] {
            match part.cast::<FrozenDict>() {
                Ok(frozen) => {
                    for (key, value) in frozen.get().iter(py) {
                        dict.set_item(key, value)?;
                    }
                }
                Err(_) if part.is_instance_of::<PyDict>() => dict.update(part.cast::<PyMapping>()?)?,
                Err(_) => dict.call_method1("update", (part,)).map(drop)?,
            }
        }
        freeze_at(dict.as_any(), "FrozenDict")
    }
}

fn view<'py>(frozen: &Bound<'py, FrozenDict>, name: &str) -> PyResult<Bound<'py, PyAny>> {
    static VIEWS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let module = VIEWS.get_or_try_init(frozen.py(), || {
        Ok::<_, PyErr>(frozen.py().import("collections.abc")?.into_any().unbind())
    })?;
    module.bind(frozen.py()).getattr(name)?.call1((frozen,))
}

/// Iterator over the keys, in insertion order (or reversed).
#[pyclass(module = "dshkit._core", name = "FrozenDictKeyIterator")]
pub(crate) struct FrozenDictKeys {
    frozen: Py<FrozenDict>,
    position: usize,
    reversed: bool,
}

#[pymethods]
impl FrozenDictKeys {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> Option<Bound<'py, PyAny>> {
        let entries = self.frozen.get().entries.as_slice();
        if self.position >= entries.len() {
            return None;
        }
        let index = if self.reversed { entries.len() - 1 - self.position } else { self.position };
        self.position += 1;
        Some(unsafe { Bound::from_borrowed_ptr(py, entries[index].0) })
    }

    fn __length_hint__(&self) -> usize {
        self.frozen.get().len().saturating_sub(self.position)
    }
}

fn immutable(what: &str) -> PyErr {
    PyTypeError::new_err(format!("FrozenDict is immutable: {what} is not supported"))
}

#[pymethods]
impl FrozenDict {
    #[new]
    #[pyo3(signature = (*args, **kwargs))]
    fn py_new<'py>(
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, FrozenDict>> {
        if args.len() > 1 {
            return Err(PyTypeError::new_err(format!(
                "FrozenDict expected at most 1 positional argument, got {}",
                args.len()
            )));
        }
        let dict = PyDict::new(py);
        if let Ok(source) = args.get_item(0) {
            // dict.update accepts a mapping (anything with keys()) or an iterable of pairs.
            dict.call_method1("update", (source,))?;
        }
        if let Some(kwargs) = kwargs {
            dict.update(kwargs.as_mapping())?;
        }
        let frozen = freeze_at(dict.as_any(), "FrozenDict")?;
        // The FrozenDict `freeze_at` built from the new dict: untracked, like every frozen value
        // (a `Self` returned here would be allocated, and GC-tracked, by `tp_alloc`).
        Ok(frozen.cast_into::<FrozenDict>()?)
    }

    fn __getitem__<'py>(&self, py: Python<'py>, key: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        match self.lookup(py, key)? {
            Some(value) => Ok(value),
            None => Err(PyKeyError::new_err(key.clone().unbind())),
        }
    }

    fn __len__(&self) -> usize {
        self.len()
    }

    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(self.lookup(py, key)?.is_some())
    }

    fn __iter__(slf: &Bound<'_, Self>) -> PyResult<Py<FrozenDictKeys>> {
        Py::new(slf.py(), FrozenDictKeys { frozen: slf.clone().unbind(), position: 0, reversed: false })
    }

    fn __reversed__(slf: &Bound<'_, Self>) -> PyResult<Py<FrozenDictKeys>> {
        Py::new(slf.py(), FrozenDictKeys { frozen: slf.clone().unbind(), position: 0, reversed: true })
    }

    #[pyo3(signature = (key, default=None, /))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        match self.lookup(py, key)? {
            Some(value) => Ok(value),
            None => Ok(default.unwrap_or_else(|| py.None().into_bound(py))),
        }
    }

    // The views are the `collections.abc` ones over this mapping: a `dict` view of a private
    // dict would reach it (through `.mapping` or the garbage collector's referents).
    fn keys<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        view(slf, "KeysView")
    }

    fn values<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        view(slf, "ValuesView")
    }

    fn items<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        view(slf, "ItemsView")
    }

    fn __richcmp__<'py>(
        slf: &Bound<'py, Self>,
        other: &Bound<'py, PyAny>,
        op: CompareOp,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let equal = match op {
            CompareOp::Eq | CompareOp::Ne => {
                if slf.as_any().is(other) {
                    Some(true)
                } else if let Ok(theirs) = other.cast::<FrozenDict>() {
                    let (a, b) = (slf.get(), theirs.get());
                    match (a.known_hash(), b.known_hash()) {
                        (Some(x), Some(y)) if x != y => Some(false),
                        _ if a.len() != b.len() => Some(false),
                        _ => Some(a.entries_equal(py, |key| b.lookup(py, key))?),
                    }
                } else if let Ok(dict) = other.cast::<PyDict>() {
                    let a = slf.get();
                    Some(a.len() == dict.len() && a.entries_equal(py, |key| dict.get_item(key))?)
                } else if is_mapping(other) {
                    // Any other Mapping compares by items, as the Mapping ABC's own `__eq__` does
                    // (so does another frozendict implementation that is not a dict subclass).
                    let a = slf.get();
                    let lookup = |key: &Bound<'py, PyAny>| match other.get_item(key) {
                        Ok(value) => Ok(Some(value)),
                        Err(err) if err.is_instance_of::<PyKeyError>(py) => Ok(None),
                        Err(err) => Err(err),
                    };
                    Some(a.len() == other.len()? && a.entries_equal(py, lookup)?)
                } else {
                    None
                }
            }
            _ => None,
        };
        Ok(match (equal, op) {
            (Some(equal), CompareOp::Eq) => pyo3::types::PyBool::new(py, equal).to_owned().into_any(),
            (Some(equal), _) => pyo3::types::PyBool::new(py, !equal).to_owned().into_any(),
            (None, _) => py.NotImplemented().into_bound(py),
        })
    }

    /// Order-independent, like `hash(frozenset(self.items()))` (PEP 814); computed once.
    fn __hash__(&self, py: Python<'_>) -> PyResult<isize> {
        if let Some(hash) = self.known_hash() {
            return Ok(hash);
        }
        let items = self
            .iter(py)
            .map(|(key, value)| PyTuple::new(py, [key, value]))
            .collect::<PyResult<Vec<_>>>()?;
        // Hashing recurses through nested values: make sure there is stack for it.
        let hash = stacker::maybe_grow(STACK_RED_ZONE, STACK_GROWTH, || PyFrozenSet::new(py, items.iter())?.hash())?;
        self.hash.store(hash, Ordering::Relaxed); // any thread computes the same value
        Ok(hash)
    }

    fn __or__<'py>(slf: &Bound<'py, Self>, other: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        if !is_mapping(other) {
            return Ok(py.NotImplemented().into_bound(py));
        }
        FrozenDict::merged(py, slf.as_any(), other)
    }

    fn __ror__<'py>(slf: &Bound<'py, Self>, other: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        if !is_mapping(other) {
            return Ok(py.NotImplemented().into_bound(py));
        }
        FrozenDict::merged(py, other, slf.as_any())
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!("FrozenDict({})", self.to_dict(py)?.repr()?))
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let py = slf.py();
        let plain = slf.get().to_dict(py)?;
        PyTuple::new(py, [slf.get_type().into_any(), PyTuple::new(py, [plain])?.into_any()])
    }

    fn copy(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    fn __copy__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    fn __deepcopy__<'py>(slf: Bound<'py, Self>, _memo: &Bound<'py, PyAny>) -> Bound<'py, Self> {
        slf
    }

    #[classmethod]
    #[pyo3(signature = (iterable, value=None, /))]
    fn fromkeys<'py>(
        cls: &Bound<'py, PyType>,
        iterable: &Bound<'py, PyAny>,
        value: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = cls.py();
        let dict = py.get_type::<PyDict>().call_method1("fromkeys", (iterable, value))?;
        freeze_at(&dict, "FrozenDict")
    }

    /// pydantic v2 support: the schema lives in Python (`dshkit.interop.pydantic`), imported lazily.
    #[classmethod]
    fn __get_pydantic_core_schema__<'py>(
        cls: &Bound<'py, PyType>,
        source: &Bound<'py, PyAny>,
        handler: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let module = cls.py().import("dshkit.interop.pydantic")?;
        module.getattr("frozendict_core_schema")?.call1((cls, source, handler))
    }

    #[classmethod]
    #[pyo3(signature = (item, /))]
    fn __class_getitem__<'py>(cls: &Bound<'py, PyType>, item: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        static GENERIC_ALIAS: PyOnceLock<Py<PyType>> = PyOnceLock::new();
        GENERIC_ALIAS.import(cls.py(), "types", "GenericAlias")?.call1((cls, item))
    }

    fn __setitem__(&self, _key: &Bound<'_, PyAny>, _value: &Bound<'_, PyAny>) -> PyResult<()> {
        Err(immutable("item assignment"))
    }

    fn __delitem__(&self, _key: &Bound<'_, PyAny>) -> PyResult<()> {
        Err(immutable("item deletion"))
    }

    #[pyo3(signature = (*_args, **_kwargs))]
    fn update(&self, _args: &Bound<'_, PyTuple>, _kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<()> {
        Err(immutable("update()"))
    }

    #[pyo3(signature = (*_args))]
    fn pop(&self, _args: &Bound<'_, PyTuple>) -> PyResult<()> {
        Err(immutable("pop()"))
    }

    fn popitem(&self) -> PyResult<()> {
        Err(immutable("popitem()"))
    }

    #[pyo3(signature = (*_args))]
    fn setdefault(&self, _args: &Bound<'_, PyTuple>) -> PyResult<()> {
        Err(immutable("setdefault()"))
    }

    fn clear(&self) -> PyResult<()> {
        Err(immutable("clear()"))
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<FrozenDict>()?;
    PyMapping::register::<FrozenDict>(m.py())?;
    Ok(())
}
