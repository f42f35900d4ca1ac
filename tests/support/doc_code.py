"""The code blocks of a documentation page as its reader sees them, read from the source.

A page is parsed by docutils, as Sphinx parses it: ``::`` literal blocks and ``>>>`` doctest
blocks are docutils' own; ``code-block`` keeps its content as written, and
``literalinclude`` takes its lines from Sphinx's own reader (``:pyobject:``, ``:lines:``,
``:dedent:`` applied), so an included function is measured as it is shown. Roles and
directives that hold no code (``:class:``, ``toctree``) are parsed by nothing and their
errors are not reported: only code is read here. Needs Sphinx (the ``docs`` extra).
"""
import os

from docutils import nodes
from docutils.core import publish_doctree
from docutils.parsers.rst import Directive, directives

# The options of Sphinx's code-block and literalinclude used in this project's pages: an
# option outside them stops the parse (docutils refuses it), and is then added here.
_CODE_BLOCK_OPTIONS = {'caption': directives.unchanged, 'linenos': directives.flag,
                       'emphasize-lines': directives.unchanged, 'dedent': directives.unchanged,
                       'name': directives.unchanged, 'class': directives.unchanged,
                       'force': directives.flag, 'lineno-start': int}
_LITERALINCLUDE_OPTIONS = dict(_CODE_BLOCK_OPTIONS, pyobject=directives.unchanged,
                               lines=directives.unchanged, language=directives.unchanged,
                               **{'start-after': directives.unchanged,
                                  'end-before': directives.unchanged,
                                  'start-at': directives.unchanged,
                                  'end-at': directives.unchanged,
                                  'lineno-match': directives.flag})


class _CodeBlock(Directive):
    has_content = True
    optional_arguments = 1
    option_spec = _CODE_BLOCK_OPTIONS

    def run(self):
        text = '\n'.join(self.content)
        return [nodes.literal_block(text, text)]


class _LiteralInclude(Directive):
    required_arguments = 1
    option_spec = _LITERALINCLUDE_OPTIONS

    def run(self):
        from sphinx.config import Config
        from sphinx.directives.code import LiteralIncludeReader

        page = self.state.document.current_source
        path = os.path.join(os.path.dirname(page), self.arguments[0])
        options = dict(self.options)
        if 'dedent' in options:
            options['dedent'] = int(options['dedent'])
        text, _ = LiteralIncludeReader(path, options, Config()).read()
        return [nodes.literal_block(text, text)]


def code_blocks(path):
    """The code blocks of the reStructuredText page ``path``, each as a list of its lines."""
    with open(path, encoding='utf-8') as f:
        source = f.read()
    # docutils keeps directives in one table for the process: ours stand in for the parse.
    table = directives._directives
    saved = dict(table)
    table.update({'code-block': _CodeBlock, 'sourcecode': _CodeBlock,
                  'literalinclude': _LiteralInclude})
    try:
        tree = publish_doctree(source, source_path=path, settings_overrides={
            'report_level': 5, 'halt_level': 5, 'file_insertion_enabled': False})
    finally:
        table.clear()
        table.update(saved)
    return [block.astext().splitlines()
            for block in tree.findall(lambda node: isinstance(
                node, (nodes.literal_block, nodes.doctest_block)))]
