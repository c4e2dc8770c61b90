"""The Foxglove layout for `viz:=foxglove` (foxglove/palletizer.json), built with foxglove-sdk's
typed layout classes: `python -m palletizer.nodes.foxglove_layout > foxglove/palletizer.json`.

3D: the robot (URDF from /robot_description), TF, the fused points and the episode's markers
(/palletizer/markers, /palletizer/plan_markers); the station camera;
plots of the cycle time per carton (/palletizer/cycle_time_s) and of the stack's stability
margin, fill and settle drift after every carton; the episode events as they come.
"""

from __future__ import annotations

import foxglove.layouts as fl

__all__ = ['layout', 'layout_json']


def layout() -> fl.Layout:
    three_d = fl.ThreeDeePanel(
        title='cell',
        config=fl.ThreeDeeConfig(
            follow_tf='world',
            topics={
                '/robot_description': fl.BaseRendererUrdfTopicSettings(visible=True),
                '/palletizer/points': fl.BaseRendererPointCloudTopicSettings(
                    visible=True, point_size=3.0, color_mode='colormap', color_field='z'
                ),
                '/palletizer/markers': fl.BaseRendererRosMarkerTopicSettings(visible=True),
                '/palletizer/plan_markers': fl.BaseRendererRosMarkerTopicSettings(visible=True),
            },
        ),
    )
    image = fl.ImagePanel(
        title='station camera',
        config=fl.ImageConfig(
            image_mode=fl.ImageModeConfig(image_topic='/cameras/station/color/image_raw')
        ),
    )
    state = '/palletizer/pallet_states'
    plot = fl.PlotPanel(
        title='stack after each carton',
        config=fl.PlotConfig(
            paths=[
                fl.PlotSeries(value=f'{state}.stability_margin_m', label='stability margin [m]'),
                fl.PlotSeries(value=f'{state}.fill_ratio', label='fill [0..1]'),
                fl.PlotSeries(value=f'{state}.settle_drift_m', label='settle drift [m]'),
            ],
            x_axis_val='index',
            show_legend=True,
        ),
    )
    cycle = fl.PlotPanel(
        title='cycle time per carton',
        config=fl.PlotConfig(
            paths=[fl.PlotSeries(value='/palletizer/cycle_time_s.data', label='cycle time [s]')],
            x_axis_val='index',
            show_legend=True,
        ),
    )
    events = fl.RawMessagesPanel(
        title='episode events',
        config=fl.RawMessagesConfig(topic_path='/palletizer/episode_events'),
    )
    left = fl.SplitContainer(
        direction='column',
        items=[fl.SplitItem(proportion=2, content=three_d), fl.SplitItem(content=image)],
    )
    right = fl.SplitContainer(
        direction='column',
        items=[
            fl.SplitItem(content=cycle),
            fl.SplitItem(content=plot),
            fl.SplitItem(content=events),
        ],
    )
    return fl.Layout(
        content=fl.SplitContainer(
            direction='row',
            items=[fl.SplitItem(proportion=2, content=left), fl.SplitItem(content=right)],
        )
    )


def layout_json() -> str:
    return layout().to_json() + '\n'


if __name__ == '__main__':
    print(layout_json(), end='')
