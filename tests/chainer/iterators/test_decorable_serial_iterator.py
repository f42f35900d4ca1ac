import threading

from researchutils.chainer.iterators import DecorableSerialIterator


def thread_name(dataset, index):
    return threading.current_thread().name


def test_examples_are_made_in_the_calling_thread():
    it = DecorableSerialIterator(list(range(4)), 2, decor_fun=thread_name)
    assert it.next() == [threading.current_thread().name] * 2


def test_dataset_is_read_only_when_next_is_called():
    reads = []

    def record(dataset, index):
        reads.append(index)
        return dataset[index]

    it = DecorableSerialIterator(list(range(10)), 3, shuffle=False, decor_fun=record)
    assert reads == []
    it.next()
    assert reads == [0, 1, 2]
