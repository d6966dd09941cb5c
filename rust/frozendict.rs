//! `FrozenDict`: an immutable, hashable, insertion-ordered mapping of `str` keys to frozen JSON
//! values, with the semantics of PEP 814's builtin `frozendict`.
//!
//! The entries live in a private `dict` that is never handed out, so lookups and iteration run
//! at `dict` speed. Every value is deep-frozen on the way in (the constructor freezes), which is
//! what lets `freeze` return an existing `FrozenDict` as it is.

use std::sync::OnceLock;

use pyo3::exceptions::{PyKeyError, PyTypeError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::pyclass::CompareOp;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyAny, PyDict, PyFrozenSet, PyMapping, PyTuple, PyType};

use crate::freeze::{freeze_at, is_mapping, untrack, STACK_GROWTH, STACK_RED_ZONE};

#[pyclass(frozen, mapping, freelist = 4096, module = "dshkit._core", name = "FrozenDict")]
pub struct FrozenDict {
    dict: Py<PyDict>,
    hash: OnceLock<isize>,
    /// Nesting depth of this mapping (1 + its deepest value): lets a frozen part be reused
    /// inside a new tree without walking it, while the depth limit still holds.
    depth: u16,
}

impl FrozenDict {
    /// Wrap a dict whose keys are `str` and whose values are already frozen. The dict must not
    /// be reachable by anyone else.
    pub fn wrap<'py>(py: Python<'py>, dict: Bound<'py, PyDict>, depth: usize) -> Bound<'py, FrozenDict> {
        untrack(dict.as_any());
        let depth = depth as u16; // never above MAX_DEPTH
        let frozen = Bound::new(py, FrozenDict { dict: dict.unbind(), hash: OnceLock::new(), depth })
            .expect("allocating a FrozenDict failed");
        untrack(frozen.as_any());
        frozen
    }

    pub fn depth(&self) -> usize {
        self.depth as usize
    }

    pub fn dict<'py>(&self, py: Python<'py>) -> &Bound<'py, PyDict> {
        self.dict.bind(py)
    }

    /// Borrowed lookup of a `str` key (no exception for a missing key).
    pub fn get_item<'py>(&self, py: Python<'py>, key: &Bound<'py, PyAny>) -> Option<Bound<'py, PyAny>> {
        unsafe {
            let ptr = ffi::PyDict_GetItemWithError(self.dict.as_ptr(), key.as_ptr());
            if ptr.is_null() {
                ffi::PyErr_Clear();
                None
            } else {
                Some(Bound::from_borrowed_ptr(py, ptr))
            }
        }
    }

    fn merged<'py>(
        py: Python<'py>,
        first: &Bound<'py, PyAny>,
        second: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let dict = PyDict::new(py);
        for part in [first, second] {
            match part.cast::<FrozenDict>() {
                Ok(frozen) => dict.update(frozen.get().dict.bind(py).as_mapping())?,
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

/// Iterator over the keys, in insertion order. Holds the `FrozenDict`, never its private dict.
#[pyclass(module = "dshkit._core", name = "FrozenDictKeyIterator")]
pub struct FrozenDictKeys {
    frozen: Py<FrozenDict>,
    position: ffi::Py_ssize_t,
}

#[pymethods]
impl FrozenDictKeys {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> Option<Bound<'py, PyAny>> {
        let dict = self.frozen.bind(py).get().dict.bind(py);
        let mut key: *mut ffi::PyObject = std::ptr::null_mut();
        let mut value: *mut ffi::PyObject = std::ptr::null_mut();
        // The dict never changes after construction, so a saved position stays valid.
        if unsafe { ffi::PyDict_Next(dict.as_ptr(), &mut self.position, &mut key, &mut value) } == 0 {
            return None;
        }
        Some(unsafe { Bound::from_borrowed_ptr(py, key) })
    }

    fn __length_hint__(&self, py: Python<'_>) -> usize {
        self.frozen.bind(py).get().dict.bind(py).len()
    }
}

fn immutable(what: &str) -> PyErr {
    PyTypeError::new_err(format!("FrozenDict is immutable: {what} is not supported"))
}

#[pymethods]
impl FrozenDict {
    #[new]
    #[pyo3(signature = (*args, **kwargs))]
    fn py_new(
        py: Python<'_>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
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
        let frozen = frozen.cast_into::<FrozenDict>()?;
        // The new object itself is tracked by the allocator; harmless for the rare direct call.
        Ok(FrozenDict { dict: frozen.get().dict.clone_ref(py), hash: OnceLock::new(), depth: frozen.get().depth })
    }

    fn __getitem__<'py>(&self, py: Python<'py>, key: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        match self.dict.bind(py).get_item(key)? {
            Some(value) => Ok(value),
            None => Err(PyKeyError::new_err(key.clone().unbind())),
        }
    }

    fn __len__(&self, py: Python<'_>) -> usize {
        self.dict.bind(py).len()
    }

    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        self.dict.bind(py).contains(key)
    }

    fn __iter__(slf: &Bound<'_, Self>) -> PyResult<Py<FrozenDictKeys>> {
        Py::new(slf.py(), FrozenDictKeys { frozen: slf.clone().unbind(), position: 0 })
    }

    fn __reversed__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        // A reversed snapshot of the keys: a list of our own, not a view of the private dict.
        let keys = self.dict.bind(py).keys();
        keys.reverse()?;
        Ok(keys.as_any().try_iter()?.into_any())
    }

    #[pyo3(signature = (key, default=None, /))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        match self.dict.bind(py).get_item(key)? {
            Some(value) => Ok(value),
            None => Ok(default.unwrap_or_else(|| py.None().into_bound(py))),
        }
    }

    // The views are the `collections.abc` ones over this mapping: a `dict` view would reach the
    // private dict (through `.mapping` or the garbage collector's referents).
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
                    match (a.hash.get(), b.hash.get()) {
                        (Some(x), Some(y)) if x != y => Some(false),
                        _ => Some(a.dict.bind(py).as_any().eq(b.dict.bind(py))?),
                    }
                } else if other.is_instance_of::<PyDict>() {
                    Some(slf.get().dict.bind(py).as_any().eq(other)?)
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
        if let Some(hash) = self.hash.get() {
            return Ok(*hash);
        }
        let items = self.dict.bind(py).items();
        // Hashing recurses through nested values: make sure there is stack for it.
        let hash = stacker::maybe_grow(STACK_RED_ZONE, STACK_GROWTH, || PyFrozenSet::new(py, items.iter())?.hash())?;
        Ok(*self.hash.get_or_init(|| hash))
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
        Ok(format!("FrozenDict({})", self.dict.bind(py).repr()?))
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let py = slf.py();
        let plain = slf.get().dict.bind(py).copy()?;
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

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<FrozenDict>()?;
    PyMapping::register::<FrozenDict>(m.py())?;
    Ok(())
}
