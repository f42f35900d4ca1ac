"""The text of the API reference pages (docs/api/*.rst), for tests that check coverage."""
import glob
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def api_reference_text():
    """Every page under docs/api, joined in one string."""
    text = ''
    for path in sorted(glob.glob(os.path.join(ROOT, 'docs', 'api', '*.rst'))):
        with open(path) as f:
            text += f.read()
    return text
