"""Without torch (the ``torch`` extra) the conversion tests are not collected."""
import importlib.util

collect_ignore_glob = [] if importlib.util.find_spec('torch') else ['test_*.py']
