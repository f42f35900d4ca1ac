import multiprocessing

from tests.support.start_methods import START_METHODS, using_start_method


def test_every_start_method_of_this_platform_is_tested():
    assert set(START_METHODS) <= set(multiprocessing.get_all_start_methods())


def test_the_previous_start_method_is_restored_after_an_error():
    previous = multiprocessing.get_start_method(allow_none=True)
    try:
        with using_start_method('forkserver'):
            assert multiprocessing.get_start_method() == 'forkserver'
            raise KeyError('inside')
    except KeyError:
        pass
    assert multiprocessing.get_start_method(allow_none=True) == previous
