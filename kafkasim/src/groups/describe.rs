//! DescribeGroups and ListGroups.

use bytes::Bytes;
use kafka_protocol::ResponseError as E;
use kafka_protocol::messages::*;

use super::coordinator::{Coordinator, Env};
use super::state::{GroupState, s};

impl Coordinator {
    /// DescribeGroups.
    pub(crate) fn describe(&self, env: &dyn Env, broker: i32, req: &DescribeGroupsRequest) -> DescribeGroupsResponse {
        let groups = req
            .groups
            .iter()
            .map(|id| {
                let group_id = id.0.to_string();
                let described = describe_groups_response::DescribedGroup::default().with_group_id(id.clone());
                if env.coordinator_of(&group_id) != broker {
                    return described.with_error_code(E::NotCoordinator.code());
                }
                let Some(g) = self.groups.get(&group_id) else {
                    return described.with_group_state(s("Dead"));
                };
                let stable = g.state == GroupState::Stable;
                let members = g
                    .members
                    .values()
                    .map(|m| {
                        let metadata = if stable {
                            m.protocols.iter().find(|(n, _)| Some(n) == g.protocol.as_ref()).map(|(_, b)| b.clone())
                        } else {
                            None
                        };
                        describe_groups_response::DescribedGroupMember::default()
                            .with_member_id(s(&m.id))
                            .with_group_instance_id(m.instance.as_deref().map(s))
                            .with_client_id(s(&m.client_id))
                            .with_client_host(s("/127.0.0.1"))
                            .with_member_metadata(metadata.unwrap_or_default())
                            .with_member_assignment(if stable { m.assignment.clone() } else { Bytes::new() })
                    })
                    .collect();
                described
                    .with_group_state(s(g.state.name()))
                    .with_protocol_type(s(g.protocol_type.as_deref().unwrap_or_default()))
                    .with_protocol_data(s(if stable { g.protocol.as_deref().unwrap_or_default() } else { "" }))
                    .with_members(members)
            })
            .collect();
        DescribeGroupsResponse::default().with_groups(groups)
    }

    /// ListGroups: the groups this broker coordinates (v4: filtered by state).
    pub(crate) fn list(&self, env: &dyn Env, broker: i32, version: i16, req: &ListGroupsRequest) -> ListGroupsResponse {
        let filter: Vec<String> = req.states_filter.iter().map(|s| s.to_lowercase()).collect();
        let groups = self
            .groups
            .iter()
            .filter(|(id, g)| g.state != GroupState::Dead && env.coordinator_of(id) == broker)
            .filter(|(_, g)| filter.is_empty() || filter.contains(&g.state.name().to_lowercase()))
            .map(|(id, g)| {
                let mut listed = list_groups_response::ListedGroup::default()
                    .with_group_id(GroupId(s(id)))
                    .with_protocol_type(s(g.protocol_type.as_deref().unwrap_or_default()));
                if version >= 4 {
                    listed = listed.with_group_state(s(g.state.name()));
                }
                listed
            })
            .collect();
        ListGroupsResponse::default().with_groups(groups)
    }
}
