"""The documentation a user meets: the tutorials in the order a user needs them, code that
fits the theme's column at a laptop's width, pictures that exist and are shown, and API
pages that open with a table of their names.

The width: furo's article column is 46em wide (736 px at the browsers' 16 px) whenever the
window is wider than 67em (1072 px), as at 1280 px; a code block's text starts 0.875rem
(14 px) inside each side, in a font of 81.25% (13 px). Measured once with headless Chromium
at 1280 px (furo 2025.12.19, Liberation Mono): the block's inner width 736 px, a character
7.80 px wide, 90 characters to a line; a block of 91 or more showed a horizontal scroll
bar. Every font of furo's monospace stack advances 0.6 em or less (DejaVu Sans Mono and
Menlo 0.602 em), which still fits 90. The test below reads those numbers from the
installed furo's stylesheet, so that a furo whose column is narrower fails it.
"""
import importlib.util
import math
import os
import re

import pytest

from tests.support.doc_pages import (
    DOCS,
    ROOT,
    TUTORIAL_ORDER,
    front_page_tutorials,
    tutorials_in_order,
    tutorials_on_disk,
)

# The longest code line that fits furo's column at 1280 px (module docstring).
CODE_COLUMN = 90
WINDOW_PX = 1280
# The widest advance of a character among furo's monospace fonts, in em.
MONOSPACE_ADVANCE_EM = 0.602
ROOT_FONT_PX = 16
IMAGE_SUFFIXES = ('.png', '.jpg', '.jpeg', '.gif', '.svg', '.webp')
# "kept small": the largest picture the docs ship, in bytes.
MAX_IMAGE_BYTES = 64 * 1024


def _pages():
    """Every reStructuredText page under docs/, outside the build."""
    for folder, subfolders, names in os.walk(DOCS):
        subfolders[:] = [name for name in subfolders if not name.startswith(('_build', '.'))]
        for name in sorted(names):
            if name.endswith('.rst'):
                yield os.path.join(folder, name)


def _read(path):
    with open(path, encoding='utf-8') as f:
        return f.read()


# The order

def test_every_tutorial_has_a_place_in_the_order():
    assert [name for name in tutorials_on_disk() if name not in TUTORIAL_ORDER] == []


def test_the_front_page_lists_every_tutorial_in_the_order():
    assert front_page_tutorials() == tutorials_in_order()


def test_the_front_page_has_a_slot_for_each_tutorial_still_to_come():
    # A name in the order without its page yet: the front page says where it goes.
    index = _read(os.path.join(DOCS, 'index.rst'))
    coming = [name for name in TUTORIAL_ORDER if name not in tutorials_on_disk()]
    assert [name for name in coming
            if '.. Slot for tutorials/{} '.format(name) not in index] == []


def test_the_front_page_lists_the_tutorials_by_name_not_by_glob():
    # A glob lists them in the alphabet's order, which is not a reader's.
    assert 'tutorials/*' not in _read(os.path.join(DOCS, 'index.rst'))


# The width

def _furo_css():
    # Found, not imported: importing furo imports Sphinx (seconds).
    furo = importlib.util.find_spec('furo')
    if furo is None:
        pytest.skip('furo is not installed here (the docs extra)')
    folder = os.path.join(os.path.dirname(furo.origin), 'theme', 'furo', 'static', 'styles')
    return _read(os.path.join(folder, 'furo.css'))


def _css_number(pattern, css):
    match = re.search(pattern, css)
    assert match, pattern
    return float(match.group(1))


def test_furo_column_holds_the_code_column_at_1280_px():
    css = _furo_css()
    content_em = _css_number(r'\.content\{[^}]*?width:([\d.]+)em', css)
    narrow_layout_em = _css_number(r'@media\(max-width:([\d.]+)em\)\{\.content\{', css)
    padding_rem = _css_number(
        r'\.highlight pre,pre\.literal-block\{font-size:var\(--code-font-size\);'
        r'padding:[\d.]+rem ([\d.]+)rem', css)
    assert '--code-font-size:var(--font-size--small--2)' in css
    code_font = _css_number(r'--font-size--small--2:([\d.]+)%', css) / 100
    # At 1280 px the page has the wide layout, where the article is content_em wide.
    assert WINDOW_PX > narrow_layout_em * ROOT_FONT_PX
    text_px = (content_em - 2 * padding_rem) * ROOT_FONT_PX
    char_px = MONOSPACE_ADVANCE_EM * code_font * ROOT_FONT_PX
    assert math.floor(text_px / char_px) == CODE_COLUMN


def _code_lines(page):
    pytest.importorskip('sphinx')
    from tests.support.doc_code import code_blocks
    return [line for block in code_blocks(page) for line in block]


@pytest.mark.parametrize('name', tutorials_on_disk() + ['index'])
def test_no_code_line_is_wider_than_the_column(name):
    folder = DOCS if name == 'index' else os.path.join(DOCS, 'tutorials')
    lines = _code_lines(os.path.join(folder, name + '.rst'))
    assert lines
    assert [line for line in lines if len(line) > CODE_COLUMN] == []


def test_the_code_reader_sees_included_code_as_it_is_shown(tmp_path):
    # literalinclude's :pyobject: shows the method with its indentation.
    (tmp_path / 'code.py').write_text('class A:\n    def f(self):\n        return 1\n')
    (tmp_path / 'page.rst').write_text(
        'Title\n=====\n\nText::\n\n    x = 1\n\n>>> y = 2\n\n'
        '.. code-block:: bash\n   :caption: c\n\n   make demo\n\n'
        '.. literalinclude:: code.py\n   :pyobject: A.f\n')
    pytest.importorskip('sphinx')
    from tests.support.doc_code import code_blocks
    assert code_blocks(str(tmp_path / 'page.rst')) == [
        ['x = 1'], ['>>> y = 2'], ['make demo'], ['    def f(self):', '        return 1']]


# The pictures

def _image_files():
    found = set()
    for folder, subfolders, names in os.walk(DOCS):
        subfolders[:] = [name for name in subfolders if not name.startswith(('_build', '.'))]
        found.update(os.path.join(folder, name) for name in names
                     if name.lower().endswith(IMAGE_SUFFIXES))
    return found


def _images_shown():
    """(page, image file) for each image and figure directive of each page."""
    shown = []
    for page in _pages():
        for target in re.findall(r'^\s*\.\. (?:image|figure):: (\S+)', _read(page), re.M):
            if target.startswith('/'):
                path = os.path.join(DOCS, target.lstrip('/'))
            else:
                path = os.path.join(os.path.dirname(page), target)
            shown.append((os.path.relpath(page, ROOT), os.path.normpath(path)))
    return shown


def test_every_image_a_page_shows_exists():
    assert [(page, path) for page, path in _images_shown() if not os.path.isfile(path)] == []


def test_every_image_under_docs_is_shown_by_a_page():
    shown = {path for _, path in _images_shown()}
    assert sorted(os.path.relpath(path, ROOT) for path in _image_files() - shown) == []


@pytest.mark.parametrize('page, expected', [
    ('index.rst', ['frames.png']),
    ('tutorials/video_prediction.rst', ['frames.png', 'loss.png']),
    ('tutorials/search.rst', ['search_history.png', 'search_importances.png']),
    ('tutorials/decorable_iterators.rst', ['decorated_batch.png']),
    ('tutorials/pytorch.rst', ['pytorch_continued_losses.png']),
])
def test_the_pictures_are_where_people_look(page, expected):
    shown = [os.path.basename(path) for shown_on, path in _images_shown()
             if shown_on == os.path.join('docs', page)]
    assert sorted(shown) == expected


def test_the_pictures_are_small():
    sizes = {os.path.relpath(path, ROOT): os.path.getsize(path) for path in _image_files()}
    assert {path: size for path, size in sizes.items() if size > MAX_IMAGE_BYTES} == {}


BUILT = os.path.join(DOCS, '_build', 'html')


def _built_pages():
    if not os.path.isdir(BUILT):
        pytest.skip('the site is not built here: `make docs` builds it (make test does, '
                    'before the suite)')
    for folder, _, names in os.walk(BUILT):
        for name in names:
            if name.endswith('.html'):
                yield os.path.join(folder, name)


def _built_image_references():
    """(page, image file) for each <img> of each built page, its source resolved."""
    found = []
    for page in _built_pages():
        for source in re.findall(r'<img [^>]*?src="([^"#?]+)"', _read(page)):
            if '://' in source or source.startswith('data:'):
                continue
            found.append((page, os.path.normpath(os.path.join(os.path.dirname(page),
                                                              source))))
    return found


def test_every_image_of_the_built_site_exists():
    references = _built_image_references()
    assert references
    assert [(os.path.relpath(page, BUILT), os.path.relpath(path, BUILT))
            for page, path in references if not os.path.isfile(path)] == []


def test_every_image_of_the_built_site_is_shown_by_a_page():
    shown = {path for _, path in _built_image_references()}
    ours = {os.path.basename(path) for path in _image_files()}
    images = set()
    for parent, _, names in os.walk(BUILT):
        # The theme's own assets (_static) are its business, unless a picture of ours
        # landed there.
        theirs = os.path.relpath(parent, BUILT).split(os.sep)[0] == '_static'
        images.update(os.path.join(parent, name) for name in names
                      if name.lower().endswith(IMAGE_SUFFIXES)
                      and (name in ours or not theirs))
    assert sorted(os.path.relpath(path, BUILT) for path in images - shown) == []


# The API pages

API = os.path.join(DOCS, 'api')
API_PAGES = sorted(name for name in os.listdir(API) if name.endswith('.rst'))
DOCUMENTING = re.compile(r'^\.\. auto(?:class|function|data|exception|method|attribute)::'
                         r'|^\.\. automodule::(?![^\n]*\n   :no-members:)', re.M)


@pytest.mark.parametrize('name', API_PAGES)
def test_each_api_page_opens_with_its_table_of_names(name):
    text = _read(os.path.join(API, name))
    table = text.find('\n.. public-names:: ')
    assert table != -1
    first_section = re.search(r'\n[^\n]+\n-{3,}\n', text)
    first_entry = DOCUMENTING.search(text)
    assert first_entry and table < first_entry.start()
    assert first_section is None or table < first_section.start()


def _tabled_modules():
    modules = set()
    for name in API_PAGES:
        for line in re.findall(r'^\.\. public-names:: (.+)$', _read(os.path.join(API, name)),
                               re.M):
            modules.update(line.split())
    return modules


def test_every_public_module_has_a_table_of_its_names():
    # The packages whose names the API reference documents (tests/test_public_api.py) and
    # the original researchutils' modules (tests/test_module_api.py).
    from tests.test_module_api import ORIGINAL
    from tests.test_public_api import PACKAGES
    assert sorted((set(PACKAGES) | set(ORIGINAL)) - _tabled_modules()) == []
