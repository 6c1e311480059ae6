//! LeaveGroup.

use kafka_protocol::ResponseError as E;
use kafka_protocol::messages::*;

use super::coordinator::{Coordinator, Env};
use super::rebalance::after_removal;
use super::state::{remove_member, s};
use crate::faults::Part;

impl Coordinator {
    /// LeaveGroup (v0–2: one member id; v3+: a batch of members, KIP-345).
    pub(crate) fn leave(
        &mut self,
        env: &dyn Env,
        broker: i32,
        version: i16,
        req: &LeaveGroupRequest,
    ) -> LeaveGroupResponse {
        let group_id = req.group_id.0.to_string();
        let top = |e: E| LeaveGroupResponse::default().with_error_code(e.code());
        if env.coordinator_of(&group_id) != broker {
            return top(E::NotCoordinator);
        }
        if let Some(code) =
            env.fault_error(ApiKey::LeaveGroup, broker, Part { group: Some(&group_id), ..Part::default() })
        {
            return LeaveGroupResponse::default().with_error_code(code);
        }
        let leaving: Vec<(String, Option<String>)> = if version >= 3 {
            req.members
                .iter()
                .map(|m| (m.member_id.to_string(), m.group_instance_id.as_ref().map(|i| i.to_string())))
                .collect()
        } else {
            vec![(req.member_id.to_string(), None)]
        };
        let member_response = |member_id: &str, instance: &Option<String>, code: i16| {
            leave_group_response::MemberResponse::default()
                .with_member_id(s(member_id))
                .with_group_instance_id(instance.as_deref().map(s))
                .with_error_code(code)
        };
        let answer = |results: Vec<leave_group_response::MemberResponse>| {
            if version >= 3 {
                LeaveGroupResponse::default().with_members(results)
            } else {
                let code = results.first().map_or(0, |r| r.error_code);
                LeaveGroupResponse::default().with_error_code(code)
            }
        };
        let Some(group) = self.groups.get_mut(&group_id) else {
            // As Kafka 4.2 answers: every member of a group it does not know is unknown.
            let unknown = E::UnknownMemberId.code();
            return answer(leaving.iter().map(|(m, i)| member_response(m, i, unknown)).collect());
        };
        let mut results = Vec::new();
        let mut removed = 0;
        for (member_id, instance) in &leaving {
            // A static member may leave by instance id alone (member id "").
            let target = match instance.as_deref().and_then(|i| group.instances.get(i)) {
                Some(known) if member_id.is_empty() || known == member_id => Ok(known.clone()),
                Some(_) => Err(E::FencedInstanceId),
                None if instance.is_some() => Err(E::UnknownMemberId),
                None if group.members.contains_key(member_id) => Ok(member_id.clone()),
                None => Err(E::UnknownMemberId),
            };
            let code = match target {
                Ok(id) => {
                    remove_member(group, &id);
                    env.record("kafka.group.member", &group_id, &format!("{id} left"));
                    removed += 1;
                    0
                }
                Err(e) => e.code(),
            };
            results.push(member_response(member_id, instance, code));
        }
        if removed > 0 {
            after_removal(env, &group_id, group, "member left");
        }
        answer(results)
    }
}
