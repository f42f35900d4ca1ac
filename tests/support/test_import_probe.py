"""tests/support/import_probe.py: each module's answer is the one a fresh interpreter gives."""
import subprocess
import sys

from tests.support.import_probe import modules_loaded_after

CANDIDATES = ('json', 'json.decoder', 'csv', 'os', 'xml.dom.minidom', 'xml.dom')


def _fresh(prelude, module):
    code = ('import sys\n{}\nbaseline = set(sys.modules)\nimport {}\n'
            'print(",".join(sorted(m for m in {!r} if m in sys.modules and m not in baseline)))'
            .format(prelude, module, CANDIDATES))
    out = subprocess.run([sys.executable, '-c', code], check=True, capture_output=True,
                         text=True, timeout=120).stdout.strip()
    return [name for name in out.split(',') if name]


def test_each_module_is_imported_in_a_child_that_starts_after_the_prelude():
    found = modules_loaded_after('import csv', ['json', 'xml.dom.minidom', 'json'],
                                 CANDIDATES)
    # csv and os come with the prelude; json is reported although an earlier child loaded it.
    assert found == {'json': ['json', 'json.decoder'],
                     'xml.dom.minidom': ['xml.dom', 'xml.dom.minidom']}
    assert found['json'] == _fresh('import csv', 'json')
    assert found['xml.dom.minidom'] == _fresh('import csv', 'xml.dom.minidom')


def test_a_module_that_fails_to_import_is_reported_with_its_error():
    found = modules_loaded_after('', ['no_such_module_here', 'json'], CANDIDATES)
    assert found['no_such_module_here'].startswith('ModuleNotFoundError: ')
    assert found['json'] == ['json', 'json.decoder']
