"""Placeholder: the video-prediction demo arrives with issue 7."""
print('make demo: the main example (examples/video_prediction/train.py) is not written yet.')
