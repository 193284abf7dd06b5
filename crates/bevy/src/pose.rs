//! Where the adapter shows a replicated entity ([`NetPose`]), and how `Transform` may
//! follow it: the game owns `Transform`, and opts in to [`TransformSync`].

use crate::bevy::ecs::schedule::SystemSet;
use crate::bevy::prelude::*;
use lagless_replication::Pose;

/// Where the adapter shows a replicated entity: on a client, the predicted pose with
/// corrections smoothed (owned entities) or the interpolated one (the rest); on a host,
/// the present. Written only when it changes. 2D kinds lie in the plane z = 0, turned
/// about z. The game's `Transform` is its own: [`TransformSync`] copies this pose into
/// it if the game asks.
#[derive(Component, Debug, Clone, Copy, PartialEq, Default)]
pub struct NetPose {
    /// Position.
    pub translation: Vec3,
    /// Orientation.
    pub rotation: Quat,
}

impl NetPose {
    /// The pose `pose` describes.
    pub fn of(pose: &Pose) -> Self {
        let [x, y, z, w] = pose.rotation;
        Self {
            translation: Vec3::from(pose.position),
            rotation: Quat::from_xyzw(x, y, z, w),
        }
    }

    /// A `Transform` at this pose (scale 1).
    pub fn transform(&self) -> Transform {
        Transform::from_translation(self.translation).with_rotation(self.rotation)
    }
}

/// How the adapter writes `Transform` from [`NetPose`] (in [`NetSystems::SyncTransform`],
/// only when the pose changed); a plugin option. Either way a new replicated entity is
/// spawned with a `Transform` at its pose, so a visual that requires one never sits at
/// the origin.
#[derive(Resource, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TransformSync {
    /// Never: the game moves `Transform` itself (from [`NetPose`] or anything else).
    #[default]
    Off,
    /// Only the translation's x and y and the rotation: z (a 2D game's layer) and scale
    /// stay the game's.
    Planar,
    /// Translation and rotation; scale stays the game's.
    All,
}

/// The adapter's systems, in the order they run in a frame. `Clock` is in `PreUpdate`
/// (the game's `Update` reads [`crate::NetClock`]); the rest in `PostUpdate`, before
/// Bevy's `TransformSystems::Propagate`, in this order: order the game's systems with
/// `.before(NetSystems::Frame)` (to send this frame's input or messages) or
/// `.after(NetSystems::Frame)` (to see this frame's entities and messages).
#[derive(SystemSet, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NetSystems {
    /// Reads the transport's clock into [`crate::NetClock`].
    Clock,
    /// Packets in, messages, ticks due (the server's [`crate::NetTick`] runs here),
    /// packets out, replicated entities spawned, written and despawned.
    Frame,
    /// `Transform` written from [`NetPose`], if [`TransformSync`] says so.
    SyncTransform,
}

/// Copies changed [`NetPose`]s into `Transform` as [`TransformSync`] says.
pub(crate) fn sync_transforms(
    sync: Res<TransformSync>,
    mut q: Query<(&NetPose, &mut Transform), Changed<NetPose>>,
) {
    if *sync == TransformSync::Off {
        return;
    }
    for (pose, mut t) in &mut q {
        let mut next = *t;
        match *sync {
            TransformSync::Planar => {
                next.translation.x = pose.translation.x;
                next.translation.y = pose.translation.y;
            }
            _ => next.translation = pose.translation,
        }
        next.rotation = pose.rotation;
        t.set_if_neq(next);
    }
}

/// Adds the sets in their order and the `Transform` sync.
pub(crate) fn configure(app: &mut App, sync: TransformSync) {
    use crate::bevy::transform::TransformSystems;
    app.insert_resource(sync)
        .configure_sets(PreUpdate, NetSystems::Clock)
        .configure_sets(
            PostUpdate,
            (NetSystems::Frame, NetSystems::SyncTransform)
                .chain()
                .before(TransformSystems::Propagate),
        )
        .add_systems(
            PostUpdate,
            sync_transforms.in_set(NetSystems::SyncTransform),
        );
}
