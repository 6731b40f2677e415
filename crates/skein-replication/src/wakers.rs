//! Wake-ups per partition: a waiter registers on the partitions it waits for, and a change
//! to one partition wakes only the waiters of that partition (never every waiter of the
//! broker). The leader's `acks=all` writes wait on their partition's high watermark, a
//! consumer's fetch on the high watermarks of its partitions, a follower's fetch on appends
//! to the partitions it copies.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use parking_lot::RwLock;
use skein_log::TopicPartition;
use tokio::sync::Notify;

/// One [`Notify`] per partition, made when first waited on. A wake takes only a read
/// lock, so appends to different partitions do not queue on one another.
#[derive(Debug, Default)]
pub struct Wakers {
    partitions: RwLock<HashMap<TopicPartition, Arc<Notify>>>,
}

impl Wakers {
    /// The partition's notifier: a future from its `notified()`, created before the waiter
    /// checks its condition, sees every wake-up after that.
    pub fn of(&self, tp: &TopicPartition) -> Arc<Notify> {
        if let Some(notify) = self.partitions.read().get(tp) {
            return Arc::clone(notify);
        }
        Arc::clone(self.partitions.write().entry(tp.clone()).or_default())
    }

    /// Wakes the waiters of one partition.
    pub fn wake(&self, tp: &TopicPartition) {
        if let Some(notify) = self.partitions.read().get(tp) {
            notify.notify_waiters();
        }
    }

    /// Wakes every waiter (leadership moved: each looks again at what it waits for).
    pub fn wake_all(&self) {
        for notify in self.partitions.read().values() {
            notify.notify_waiters();
        }
    }

    /// Forgets a partition (its log was deleted); its waiters are woken first.
    pub fn forget(&self, tp: &TopicPartition) {
        if let Some(notify) = self.partitions.write().remove(tp) {
            notify.notify_waiters();
        }
    }
}

/// A future that completes at the next wake-up of any of `notifiers`, registered when this
/// is called (before the caller checks), or never when there are none.
pub fn any_woken(notifiers: &[Arc<Notify>]) -> impl Future<Output = ()> + Send + '_ {
    // Made now: `notify_waiters` reaches a `Notified` from its creation, polled or not.
    let waits: Vec<_> = notifiers
        .iter()
        .map(|notify| Box::pin(notify.notified()))
        .collect();
    async move {
        if waits.is_empty() {
            std::future::pending::<()>().await;
        }
        first_of(waits).await;
    }
}

/// Completes when the first of `waits` does.
async fn first_of<F: Future<Output = ()> + Unpin>(mut waits: Vec<F>) {
    std::future::poll_fn(|cx| {
        for wait in &mut waits {
            if std::pin::Pin::new(wait).poll(cx).is_ready() {
                return std::task::Poll::Ready(());
            }
        }
        std::task::Poll::Pending
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_wake_reaches_the_waiters_of_its_partition_only() {
        let wakers = Wakers::default();
        let (a, b) = (TopicPartition::new("t", 0), TopicPartition::new("t", 1));
        let on_a = [wakers.of(&a)];
        let on_b = [wakers.of(&b)];
        let waiting_a = any_woken(&on_a);
        let waiting_b = any_woken(&on_b);
        // Woken before either is polled: the registration at creation keeps it.
        wakers.wake(&a);
        tokio::time::timeout(std::time::Duration::from_secs(1), waiting_a)
            .await
            .expect("the waiter of partition 0 is woken");
        let still = tokio::time::timeout(std::time::Duration::from_millis(50), waiting_b).await;
        assert!(
            still.is_err(),
            "a wake of partition 0 woke partition 1's waiter"
        );
    }

    #[tokio::test]
    async fn any_of_several_partitions_wakes_and_wake_all_reaches_everyone() {
        let wakers = Wakers::default();
        let tps: Vec<_> = (0..3).map(|i| TopicPartition::new("t", i)).collect();
        let all: Vec<_> = tps.iter().map(|tp| wakers.of(tp)).collect();
        let waiting = any_woken(&all);
        wakers.wake(&tps[2]);
        tokio::time::timeout(std::time::Duration::from_secs(1), waiting)
            .await
            .expect("a wake of the third partition completes the wait");
        let one = [wakers.of(&tps[0])];
        let waiting = any_woken(&one);
        wakers.wake_all();
        tokio::time::timeout(std::time::Duration::from_secs(1), waiting)
            .await
            .expect("wake_all reaches every waiter");
        let none = any_woken(&[]);
        let never = tokio::time::timeout(std::time::Duration::from_millis(20), none).await;
        assert!(never.is_err());
    }
}
