//! Lets the code tell Python versions apart (`#[cfg(Py_3_14)]`): the JSON writer reads an ASCII
//! `str`'s text from the object itself where the object layout allows it.
fn main() {
    pyo3_build_config::use_pyo3_cfgs();
}
