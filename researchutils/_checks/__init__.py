"""Argument checks shared across packages (standard library only), one rule for each kind.

One rule for each kind of argument, so that every module accepts and refuses
the same values with the same words. All of them:

- refuse a bool where a number is meant (``True`` is a mistake, not 1),
  numbers.Integral and numbers.Real otherwise (NumPy scalars pass);
- refuse NaN always, and infinity where a finite number is meant;
- name the argument and show the value (``repr``) in the message;
- raise TypeError for a value of the wrong kind and ValueError for one out of
  range. ``type_error=ValueError`` keeps the ValueError of a module whose
  callers already rely on it.

Each returns the value converted (``int``, ``float``, ``bool``, ``list``, ``str``).
The checks live by kind: :mod:`~researchutils._checks.numeric` (numbers, bools,
seeds), :mod:`~researchutils._checks.text` (strings, paths, names),
:mod:`~researchutils._checks.objects` (callables, mappings, devices,
communicators) and :mod:`~researchutils._checks.arrays` (dtypes, arrays,
indices; NumPy imported where used). Every module imports them from here.

Tests: ``tests/test_checks.py``; that every public argument goes through them:
``tests/test_every_argument_checked.py``.
"""
from researchutils._checks.arrays import check_float_dtype, check_indices, check_number_array
from researchutils._checks.numeric import (
    check_bool,
    check_float,
    check_int,
    check_non_negative_float,
    check_non_negative_int,
    check_positive_float,
    check_positive_int,
    check_probability,
    check_seed,
    check_timeout,
)
from researchutils._checks.objects import check_callable, check_comm, check_devices, check_mapping
from researchutils._checks.text import (
    check_choice,
    check_file_name,
    check_path,
    check_str,
    check_str_list,
)

__all__ = [
    'check_bool', 'check_callable', 'check_choice', 'check_comm', 'check_devices',
    'check_file_name', 'check_float', 'check_float_dtype', 'check_indices', 'check_int',
    'check_mapping', 'check_non_negative_float', 'check_non_negative_int', 'check_number_array',
    'check_path', 'check_positive_float', 'check_positive_int', 'check_probability', 'check_seed',
    'check_str', 'check_str_list', 'check_timeout',
]
