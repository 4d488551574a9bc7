"""A public, named view of a compiled PickSort scene, in the spirit of dm_control's ``physics.named``.

Task code, demonstrators, tests and benchmarks read the robot and the objects through a ``SceneView`` (the env's
``env.unwrapped.scene``) instead of bare ``qpos`` indices or the env's private attributes.  Names come from
``world.constants`` and are resolved to ids once, after the model compiles; the view holds only index arrays
and a reference to the model, so reads cost one fancy-indexing operation.

Example::

    scene = env.unwrapped.scene
    scene.arm_qpos(env.unwrapped.data)           # (7,) rad
    scene.object_pos(env.unwrapped.data)         # (N, 3) m, true object centres
    scene.joint_qpos(env.unwrapped.data, "hand/th_mcp")
"""

from __future__ import annotations

import mujoco
import numpy as np
import numpy.typing as npt

from r2s2r_envs.world import constants as C


class SceneView:
    """Indices of the PickSort scene's joints, actuators, sites and objects, by name.

    Attributes (index arrays in the order of ``constants``):
        arm_qpos_adr, arm_dof_adr: ``qpos`` / ``qvel`` addresses of the 7 arm joints.
        hand_qpos_adr, hand_dof_adr: same for the 16 finger joints (order ``constants.HAND_JOINTS``).
        arm_actuators, hand_actuators: actuator ids.
        arm_range, hand_range: (7, 2) and (16, 2) joint limits, rad.
        tcp_site: id of the tool-centre-point site.
        belt_geom: id of the belt geom.
        belt_top, belt_center_x, belt_upstream_y: belt surface height, centre line x and upstream end y, m.
        bin_sites: (3,) bin region site ids (order ``constants.CATEGORIES``).
        object_body, object_qpos_adr, object_dof_adr: per object slot (num_objects,).
        object_geoms: (num_objects, 3) the slot's geom of each category.
    """

    def __init__(self, model: mujoco.MjModel, num_objects: int) -> None:
        m = model
        self.model = model
        self.num_objects = num_objects
        self.arm_qpos_adr = np.array([m.joint(n).qposadr[0] for n in C.ARM_JOINTS])
        self.arm_dof_adr = np.array([m.joint(n).dofadr[0] for n in C.ARM_JOINTS])
        self.hand_qpos_adr = np.array([m.joint(n).qposadr[0] for n in C.HAND_JOINTS])
        self.hand_dof_adr = np.array([m.joint(n).dofadr[0] for n in C.HAND_JOINTS])
        self.arm_actuators = np.array([m.actuator(n).id for n in C.ARM_ACTUATORS])
        self.hand_actuators = np.array([m.actuator(n).id for n in C.HAND_ACTUATORS])
        self.arm_range = m.jnt_range[[m.joint(n).id for n in C.ARM_JOINTS]].copy()
        self.hand_range = m.jnt_range[[m.joint(n).id for n in C.HAND_JOINTS]].copy()
        self.tcp_site = m.site(C.TCP_SITE).id
        self.belt_geom = m.geom(C.BELT_GEOM).id
        belt = m.site(C.BELT_SITE)
        self.belt_top = float(belt.pos[2])
        self.belt_center_x = float(belt.pos[0])
        self.belt_upstream_y = float(belt.pos[1] + belt.size[1])
        self.bin_sites = np.array([m.site(C.BIN_SITES[c]).id for c in C.CATEGORIES])
        joints = [m.joint(f"{C.object_prefix(i)}{C.OBJECT_JOINT}") for i in range(num_objects)]
        self.object_body = np.array([m.body(f"{C.object_prefix(i)}{C.OBJECT_JOINT}").id for i in range(num_objects)])
        self.object_qpos_adr = np.array([j.qposadr[0] for j in joints])
        self.object_dof_adr = np.array([j.dofadr[0] for j in joints])
        self.object_geoms = np.array(
            [[m.geom(f"{C.object_prefix(i)}{c}").id for c in C.CATEGORIES] for i in range(num_objects)]
        )
        # Hot-path indexers: a slice where the addresses are contiguous (a view, no fancy-indexing copy).
        self.arm_q, self.arm_v = _indexer(self.arm_qpos_adr), _indexer(self.arm_dof_adr)
        self.hand_q, self.hand_v = _indexer(self.hand_qpos_adr), _indexer(self.hand_dof_adr)
        self.arm_u, self.hand_u = _indexer(self.arm_actuators), _indexer(self.hand_actuators)
        # Flat index arrays, so reading every object is one fancy-indexing operation.
        self.object_pos_idx = (self.object_qpos_adr[:, None] + np.arange(3)).ravel()
        self.object_quat_idx = (self.object_qpos_adr[:, None] + np.arange(3, 7)).ravel()
        self.object_vel_idx = (self.object_dof_adr[:, None] + np.arange(6)).ravel()
        self.object_linvel_idx = (self.object_dof_adr[:, None] + np.arange(3)).ravel()

    # -------------------------------------------------------------- robot
    def arm_qpos(self, data: mujoco.MjData) -> np.ndarray:
        """(7,) arm joint angles, rad (a copy)."""
        return data.qpos[self.arm_qpos_adr]

    def arm_qvel(self, data: mujoco.MjData) -> np.ndarray:
        """(7,) arm joint velocities, rad/s."""
        return data.qvel[self.arm_dof_adr]

    def hand_qpos(self, data: mujoco.MjData) -> np.ndarray:
        """(16,) finger joint angles, rad."""
        return data.qpos[self.hand_qpos_adr]

    def hand_qvel(self, data: mujoco.MjData) -> np.ndarray:
        """(16,) finger joint velocities, rad/s."""
        return data.qvel[self.hand_dof_adr]

    def tcp_pos(self, data: mujoco.MjData) -> np.ndarray:
        """(3,) TCP position, m (a copy)."""
        return data.site_xpos[self.tcp_site].copy()

    def tcp_quat(self, data: mujoco.MjData) -> np.ndarray:
        """(4,) TCP orientation (w, x, y, z)."""
        q = np.empty(4)
        mujoco.mju_mat2Quat(q, data.site_xmat[self.tcp_site])
        return q

    def joint_qpos(self, data: mujoco.MjData, name: str) -> float:
        """Angle of one joint by its full name (e.g. ``"arm/joint4"``, ``"hand/th_mcp"``), rad.

        Raises:
            KeyError: unknown name; the message lists the robot's joints.
        """
        try:
            adr = self.model.joint(name).qposadr[0]
        except KeyError:
            raise KeyError(f"no joint {name!r}; robot joints: {list(C.ARM_JOINTS + C.HAND_JOINTS)}") from None
        return float(data.qpos[adr])

    # -------------------------------------------------------------- objects
    def object_pos(self, data: mujoco.MjData) -> np.ndarray:
        """(N, 3) true object centres, m (a copy)."""
        return data.qpos[self.object_pos_idx].reshape(self.num_objects, 3)

    def object_quat(self, data: mujoco.MjData) -> np.ndarray:
        """(N, 4) true object orientations (w, x, y, z)."""
        return data.qpos[self.object_quat_idx].reshape(self.num_objects, 4)

    def object_vel(self, data: mujoco.MjData) -> np.ndarray:
        """(N, 6) true object linear (m/s) and angular (rad/s) velocities."""
        return data.qvel[self.object_vel_idx].reshape(self.num_objects, 6)

    def set_object_pose(
        self,
        data: mujoco.MjData,
        i: int,
        pos: npt.ArrayLike,
        quat: npt.ArrayLike = (1.0, 0.0, 0.0, 0.0),
    ) -> None:
        """Teleport object ``i`` to ``pos`` with orientation ``quat``, at rest (call ``mj_forward`` after)."""
        adr, dof = self.object_qpos_adr[i], self.object_dof_adr[i]
        data.qpos[adr : adr + 3] = pos
        data.qpos[adr + 3 : adr + 7] = quat
        data.qvel[dof : dof + 6] = 0.0

    def bin_center(self, data: mujoco.MjData, category: int) -> np.ndarray:
        """(3,) centre of the bin region of ``category`` (index into ``constants.CATEGORIES``), m."""
        return data.site_xpos[self.bin_sites[category]].copy()


def _indexer(adr: np.ndarray) -> slice | np.ndarray:
    """``slice(a, b)`` if ``adr`` is ``a, a+1, ..., b-1``, else ``adr`` itself."""
    if len(adr) and np.array_equal(adr, np.arange(adr[0], adr[0] + len(adr))):
        return slice(int(adr[0]), int(adr[0]) + len(adr))
    return adr
