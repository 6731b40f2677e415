//! Topics, their config overrides and their partitions (replicas, ISR, leader and epochs).
//!
//! A partition changes only by compare-and-set on its `partition_epoch`, in one statement, so
//! of two writers that read the same state exactly one wins: this is what fences a stale
//! leader or controller.

use std::collections::BTreeMap;

use sqlx::Row;

use crate::names::{validate_topic_name, INTERNAL_TOPICS};
use crate::{found, new_id, now_ms, Catalog, CatalogError, Result};

/// A topic as created: its partitions' replicas are given by the placement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTopic {
    pub name: String,
    /// Replicas of each partition, preferred leader first; its length is the partition count.
    pub placement: Vec<Vec<i32>>,
    pub configs: BTreeMap<String, String>,
}

/// A stored topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topic {
    pub id: String,
    pub tenant_id: String,
    pub name: String,
    pub partitions: i32,
    pub replication_factor: i32,
    pub configs: BTreeMap<String, String>,
    pub created_at: i64,
}

/// A stored partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partition {
    pub topic_id: String,
    pub partition: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub leader: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    /// During a reassignment, the replicas being added (not in the original set) and those
    /// to be removed once the target is in sync; both empty otherwise.
    pub adding: Vec<i32>,
    pub removing: Vec<i32>,
}

/// A new leader and ISR for a partition, applied only if the partition is still at
/// `expected_partition_epoch`. A leader change bumps the leader epoch; every change bumps
/// the partition epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionUpdate {
    pub expected_partition_epoch: i32,
    pub leader: i32,
    pub isr: Vec<i32>,
}

fn ids(list: &[i32]) -> String {
    list.iter()
        .map(i32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

fn parse_ids(text: &str) -> Result<Vec<i32>> {
    if text.is_empty() {
        return Ok(Vec::new());
    }
    text.split(',')
        .map(|id| {
            id.parse().map_err(|_| CatalogError::Corrupt {
                what: "broker id list",
                reason: text.to_owned(),
            })
        })
        .collect()
}

fn int(row: &sqlx::any::AnyRow, column: &str) -> Result<i32> {
    let value: i64 = row.try_get(column)?;
    i32::try_from(value).map_err(|_| CatalogError::Corrupt {
        what: "integer column",
        reason: format!("{column} = {value}"),
    })
}

fn partition(row: &sqlx::any::AnyRow) -> Result<Partition> {
    Ok(Partition {
        topic_id: row.try_get("topic_id")?,
        partition: int(row, "partition")?,
        replicas: parse_ids(&row.try_get::<String, _>("replicas")?)?,
        isr: parse_ids(&row.try_get::<String, _>("isr")?)?,
        leader: int(row, "leader")?,
        leader_epoch: int(row, "leader_epoch")?,
        partition_epoch: int(row, "partition_epoch")?,
        adding: parse_ids(&row.try_get::<String, _>("adding_replicas")?)?,
        removing: parse_ids(&row.try_get::<String, _>("removing_replicas")?)?,
    })
}

fn validate_placement(placement: &[Vec<i32>]) -> Result<i32> {
    let invalid = |reason: String| CatalogError::Invalid {
        what: "partition placement",
        reason,
    };
    let Some(first) = placement.first() else {
        return Err(invalid("a topic needs at least one partition".to_owned()));
    };
    let replication = first.len();
    for (p, replicas) in placement.iter().enumerate() {
        if replicas.is_empty() || replicas.len() != replication {
            return Err(invalid(format!(
                "partition {p} has {} replicas; every partition needs the same number (>= 1)",
                replicas.len()
            )));
        }
        let mut sorted = replicas.clone();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.len() != replicas.len() {
            return Err(invalid(format!("partition {p} names a broker twice")));
        }
    }
    i32::try_from(replication).map_err(|_| invalid("too many replicas".to_owned()))
}

impl Catalog {
    /// Creates a topic with its configs and partitions in one transaction; the first replica
    /// of each partition leads it, with every replica in the ISR.
    pub async fn create_topic(&self, tenant_id: &str, topic: &NewTopic) -> Result<Topic> {
        validate_topic_name(&topic.name)?;
        self.insert_topic(tenant_id, topic, true).await
    }

    /// Creates one of a tenant's internal topics ([`INTERNAL_TOPICS`]), as
    /// [`create_topic`](Self::create_topic) does a tenant's own but outside its partition
    /// quota: the cluster needs it to serve the tenant's groups.
    pub async fn create_internal_topic(&self, tenant_id: &str, topic: &NewTopic) -> Result<Topic> {
        if !INTERNAL_TOPICS.contains(&topic.name.as_str()) {
            return Err(CatalogError::Invalid {
                what: "internal topic",
                reason: format!("{:?} is not an internal topic", topic.name),
            });
        }
        self.insert_topic(tenant_id, topic, false).await
    }

    async fn insert_topic(&self, tenant_id: &str, topic: &NewTopic, quota: bool) -> Result<Topic> {
        let replication_factor = validate_placement(&topic.placement)?;
        let partitions =
            i32::try_from(topic.placement.len()).map_err(|_| CatalogError::Invalid {
                what: "partition count",
                reason: format!("{} is too many", topic.placement.len()),
            })?;
        let created = Topic {
            id: new_id(),
            tenant_id: tenant_id.to_owned(),
            name: topic.name.clone(),
            partitions,
            replication_factor,
            configs: topic.configs.clone(),
            created_at: now_ms(),
        };
        let mut tx = self.pool.begin().await?;
        lock_tenant(&mut tx, tenant_id).await?;
        sqlx::query(
            "INSERT INTO topics (id, tenant_id, name, partitions, replication_factor, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&created.id)
        .bind(&created.tenant_id)
        .bind(&created.name)
        .bind(i64::from(partitions))
        .bind(i64::from(replication_factor))
        .bind(created.created_at)
        .execute(&mut *tx)
        .await
        .map_err(CatalogError::on_insert("topic", &topic.name))?;
        // After the insert, so that a name in use is refused as such whatever the quota.
        if quota {
            check_partitions_quota(&mut tx, tenant_id).await?;
        }
        for (name, value) in &topic.configs {
            sqlx::query("INSERT INTO topic_configs (topic_id, name, value) VALUES ($1, $2, $3)")
                .bind(&created.id)
                .bind(name)
                .bind(value)
                .execute(&mut *tx)
                .await?;
        }
        for (index, replicas) in topic.placement.iter().enumerate() {
            insert_partition(&mut tx, &created.id, index, replicas).await?;
        }
        tx.commit().await?;
        Ok(created)
    }

    /// A tenant's topic by name.
    pub async fn topic(&self, tenant_id: &str, name: &str) -> Result<Topic> {
        let row = sqlx::query(
            "SELECT id, tenant_id, name, partitions, replication_factor, created_at \
             FROM topics WHERE tenant_id = $1 AND name = $2",
        )
        .bind(tenant_id)
        .bind(name)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else {
            return Err(CatalogError::NotFound {
                what: "topic",
                name: name.to_owned(),
            });
        };
        self.with_configs(&row).await
    }

    /// Every topic of every tenant, with its tenant's name, by tenant and topic name.
    pub async fn all_topics(&self) -> Result<Vec<(String, Topic)>> {
        let rows = sqlx::query(
            "SELECT t.id, t.tenant_id, t.name, t.partitions, t.replication_factor, t.created_at, \
               n.name AS tenant_name \
             FROM topics t JOIN tenants n ON n.id = t.tenant_id ORDER BY n.name, t.name",
        )
        .fetch_all(&self.pool)
        .await?;
        // Every config in one query, not one per topic: the controller reads this often.
        let mut configs: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
        for c in sqlx::query("SELECT topic_id, name, value FROM topic_configs")
            .fetch_all(&self.pool)
            .await?
        {
            configs
                .entry(c.try_get("topic_id")?)
                .or_default()
                .insert(c.try_get("name")?, c.try_get("value")?);
        }
        rows.iter()
            .map(|row| {
                let id: String = row.try_get("id")?;
                let topic = topic_row(row, configs.remove(&id).unwrap_or_default())?;
                Ok((row.try_get("tenant_name")?, topic))
            })
            .collect()
    }

    /// Every partition of every topic, by topic id and index.
    pub async fn all_partitions(&self) -> Result<Vec<Partition>> {
        let rows = sqlx::query(
            "SELECT topic_id, partition, replicas, isr, leader, leader_epoch, partition_epoch, \
             adding_replicas, removing_replicas \
             FROM partitions ORDER BY topic_id, partition",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(partition).collect()
    }

    /// A tenant's own topics (not the internal ones) in name order.
    pub async fn topics(&self, tenant_id: &str) -> Result<Vec<Topic>> {
        self.topics_page(tenant_id, None, u32::MAX).await
    }

    /// Up to `limit` of a tenant's own topics (not the internal ones) in name order, after
    /// `after` when given.
    pub async fn topics_page(
        &self,
        tenant_id: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<Topic>> {
        let rows = sqlx::query(
            "SELECT id, tenant_id, name, partitions, replication_factor, created_at \
             FROM topics WHERE tenant_id = $1 AND name > $2 AND substr(name, 1, 2) <> '__' \
             ORDER BY name LIMIT $3",
        )
        .bind(tenant_id)
        .bind(after.unwrap_or(""))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        let mut topics = Vec::with_capacity(rows.len());
        for row in &rows {
            topics.push(self.with_configs(row).await?);
        }
        Ok(topics)
    }

    async fn with_configs(&self, row: &sqlx::any::AnyRow) -> Result<Topic> {
        let id: String = row.try_get("id")?;
        let configs = sqlx::query("SELECT name, value FROM topic_configs WHERE topic_id = $1")
            .bind(&id)
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(|c| Ok((c.try_get("name")?, c.try_get("value")?)))
            .collect::<Result<BTreeMap<String, String>>>()?;
        topic_row(row, configs)
    }

    /// Replaces a topic's config overrides, in one transaction.
    pub async fn set_topic_configs(
        &self,
        topic_id: &str,
        configs: &BTreeMap<String, String>,
    ) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("DELETE FROM topic_configs WHERE topic_id = $1")
            .bind(topic_id)
            .execute(&mut *tx)
            .await?;
        for (name, value) in configs {
            sqlx::query("INSERT INTO topic_configs (topic_id, name, value) VALUES ($1, $2, $3)")
                .bind(topic_id)
                .bind(name)
                .bind(value)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Deletes a tenant's topic, its configs and partitions.
    pub async fn delete_topic(&self, tenant_id: &str, name: &str) -> Result<()> {
        let deleted = sqlx::query("DELETE FROM topics WHERE tenant_id = $1 AND name = $2")
            .bind(tenant_id)
            .bind(name)
            .execute(&self.pool)
            .await?;
        found(deleted, "topic", name)
    }

    /// Adds partitions placed by `placement` to a topic, atomically: the count moves from
    /// `expected_count` or nothing changes.
    pub async fn add_partitions(
        &self,
        topic_id: &str,
        expected_count: i32,
        placement: &[Vec<i32>],
    ) -> Result<()> {
        validate_placement(placement)?;
        let new_count = i64::from(expected_count) + placement.len() as i64;
        let mut tx = self.pool.begin().await?;
        let tenant: Option<String> =
            sqlx::query_scalar("SELECT tenant_id FROM topics WHERE id = $1")
                .bind(topic_id)
                .fetch_optional(&mut *tx)
                .await?;
        let Some(tenant) = tenant else {
            return Err(CatalogError::NotFound {
                what: "topic",
                name: topic_id.to_owned(),
            });
        };
        lock_tenant(&mut tx, &tenant).await?;
        let updated =
            sqlx::query("UPDATE topics SET partitions = $1 WHERE id = $2 AND partitions = $3")
                .bind(new_count)
                .bind(topic_id)
                .bind(i64::from(expected_count))
                .execute(&mut *tx)
                .await?;
        if updated.rows_affected() != 1 {
            return Err(CatalogError::Conflict {
                what: "partition count",
                expected: i64::from(expected_count),
            });
        }
        check_partitions_quota(&mut tx, &tenant).await?;
        let first = usize::try_from(expected_count).unwrap_or(0);
        for (offset, replicas) in placement.iter().enumerate() {
            insert_partition(&mut tx, topic_id, first + offset, replicas).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// A topic's partitions in order.
    pub async fn partitions(&self, topic_id: &str) -> Result<Vec<Partition>> {
        let rows = sqlx::query(
            "SELECT topic_id, partition, replicas, isr, leader, leader_epoch, partition_epoch, \
             adding_replicas, removing_replicas \
             FROM partitions WHERE topic_id = $1 ORDER BY partition",
        )
        .bind(topic_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(partition).collect()
    }

    /// One partition as stored; [`CatalogError::NotFound`] when the topic has no such index.
    pub async fn partition(&self, topic_id: &str, index: i32) -> Result<Partition> {
        let mut tx = self.pool.begin().await?;
        let partition = Self::partition_in(&mut tx, topic_id, index).await?;
        tx.commit().await?;
        Ok(partition)
    }

    /// Applies `change`, a pure function of the partition as stored (`partition_change.rs`),
    /// in one transaction as a compare-and-set on the partition epoch; answers the partition
    /// as stored. A change that refuses (its error) leaves the partition as it was.
    pub async fn change_partition<F>(
        &self,
        topic_id: &str,
        index: i32,
        change: F,
    ) -> Result<Partition>
    where
        F: FnOnce(&Partition) -> Result<Partition>,
    {
        let mut tx = self.pool.begin().await?;
        let current = Self::partition_in(&mut tx, topic_id, index).await?;
        let changed = change(&current)?;
        Self::store_change(&mut tx, &changed, current.partition_epoch).await?;
        tx.commit().await?;
        Ok(changed)
    }

    /// Applies `update` if the partition is still at its expected epoch; otherwise
    /// [`CatalogError::Conflict`] and nothing changes. Returns the partition as stored.
    pub async fn update_partition(
        &self,
        topic_id: &str,
        index: i32,
        update: &PartitionUpdate,
    ) -> Result<Partition> {
        let mut tx = self.pool.begin().await?;
        let current = Self::partition_in(&mut tx, topic_id, index).await?;
        let changed = current.elect(update)?;
        Self::store_change(&mut tx, &changed, current.partition_epoch).await?;
        tx.commit().await?;
        Ok(changed)
    }
}

impl Catalog {
    /// AlterPartition: the leader's new ISR for a partition, applied only while `leader`
    /// still leads it in `leader_epoch` and the partition is at `partition_epoch` (so a
    /// fenced leader, or one that missed a change, changes nothing:
    /// [`CatalogError::Conflict`]). The ISR must hold the leader and only its replicas.
    pub async fn alter_isr(
        &self,
        topic_id: &str,
        index: i32,
        leader: i32,
        leader_epoch: i32,
        partition_epoch: i32,
        isr: &[i32],
    ) -> Result<Partition> {
        let mut tx = self.pool.begin().await?;
        let current = Self::partition_in(&mut tx, topic_id, index).await?;
        let changed = current.change_isr(leader, leader_epoch, partition_epoch, isr)?;
        Self::store_change(&mut tx, &changed, current.partition_epoch).await?;
        tx.commit().await?;
        Ok(changed)
    }

    async fn partition_in(
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        topic_id: &str,
        index: i32,
    ) -> Result<Partition> {
        let row = sqlx::query(
            "SELECT topic_id, partition, replicas, isr, leader, leader_epoch, partition_epoch, \
             adding_replicas, removing_replicas \
             FROM partitions WHERE topic_id = $1 AND partition = $2",
        )
        .bind(topic_id)
        .bind(i64::from(index))
        .fetch_optional(&mut **tx)
        .await?
        .ok_or_else(|| CatalogError::NotFound {
            what: "partition",
            name: format!("{topic_id}-{index}"),
        })?;
        partition(&row)
    }

    /// Writes a partition's new leadership and ISR if it is still at `expected` (the epoch
    /// it was read at), in one compare-and-set statement.
    async fn store_change(
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        changed: &Partition,
        expected: i32,
    ) -> Result<()> {
        let updated = sqlx::query(
            "UPDATE partitions SET leader = $1, leader_epoch = $2, isr = $3, partition_epoch = $4, \
             replicas = $5, adding_replicas = $6, removing_replicas = $7 \
             WHERE topic_id = $8 AND partition = $9 AND partition_epoch = $10",
        )
        .bind(i64::from(changed.leader))
        .bind(i64::from(changed.leader_epoch))
        .bind(ids(&changed.isr))
        .bind(i64::from(changed.partition_epoch))
        .bind(ids(&changed.replicas))
        .bind(ids(&changed.adding))
        .bind(ids(&changed.removing))
        .bind(&changed.topic_id)
        .bind(i64::from(changed.partition))
        .bind(i64::from(expected))
        .execute(&mut **tx)
        .await?;
        if updated.rows_affected() != 1 {
            return Err(CatalogError::Conflict {
                what: "partition",
                expected: i64::from(expected),
            });
        }
        Ok(())
    }
}

fn topic_row(row: &sqlx::any::AnyRow, configs: BTreeMap<String, String>) -> Result<Topic> {
    Ok(Topic {
        id: row.try_get("id")?,
        tenant_id: row.try_get("tenant_id")?,
        name: row.try_get("name")?,
        partitions: int(row, "partitions")?,
        replication_factor: int(row, "replication_factor")?,
        configs,
        created_at: row.try_get("created_at")?,
    })
}

/// Locks the tenant's row (a no-op update) until the transaction ends, so that changes to
/// its partition count are made and counted one after the other and cannot overshoot its
/// quota together.
async fn lock_tenant(tx: &mut sqlx::Transaction<'_, sqlx::Any>, tenant_id: &str) -> Result<()> {
    sqlx::query("UPDATE tenants SET id = id WHERE id = $1")
        .bind(tenant_id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Refuses the transaction's change when it leaves the tenant past its tenant-wide
/// `partitions` quota; run after the change, with the tenant locked ([`lock_tenant`]).
async fn check_partitions_quota(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    tenant_id: &str,
) -> Result<()> {
    let limit: Option<Option<i64>> = sqlx::query_scalar(
        "SELECT partitions FROM quotas WHERE tenant_id = $1 AND principal_id = ''",
    )
    .bind(tenant_id)
    .fetch_optional(&mut **tx)
    .await?;
    let Some(limit) = limit.flatten() else {
        return Ok(());
    };
    let used: i64 = sqlx::query_scalar(
        "SELECT CAST(COALESCE(SUM(partitions), 0) AS BIGINT) FROM topics \
         WHERE tenant_id = $1 AND substr(name, 1, 2) <> '__'",
    )
    .bind(tenant_id)
    .fetch_one(&mut **tx)
    .await?;
    if used > limit {
        return Err(CatalogError::QuotaExceeded {
            what: "partitions",
            limit,
            requested: used,
        });
    }
    Ok(())
}

async fn insert_partition(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    topic_id: &str,
    index: usize,
    replicas: &[i32],
) -> Result<()> {
    let leader = replicas.first().copied().unwrap_or(-1);
    sqlx::query(
        "INSERT INTO partitions \
           (topic_id, partition, replicas, isr, leader, leader_epoch, partition_epoch) \
         VALUES ($1, $2, $3, $4, $5, 0, 0)",
    )
    .bind(topic_id)
    .bind(index as i64)
    .bind(ids(replicas))
    .bind(ids(replicas))
    .bind(i64::from(leader))
    .execute(&mut **tx)
    .await?;
    Ok(())
}
