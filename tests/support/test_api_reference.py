from tests.support.api_reference import api_reference_text


def test_api_reference_text_holds_every_page():
    text = api_reference_text()
    assert '.. automodule:: researchutils.chainer.functions\n' in text
    assert '.. automodule:: researchutils.chainer.links\n' in text
