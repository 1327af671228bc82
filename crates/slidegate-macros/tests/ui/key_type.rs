use slidegate::{Limiter, MemoryStore, RateLimited, rate_limit};

struct UserId(u64);

#[rate_limit(limiter = limiter, limit = 5, window = "1s", key = user)]
async fn lookup(limiter: &Limiter<MemoryStore>, user: UserId) -> Result<u64, RateLimited> {
    Ok(user.0)
}

#[rate_limit(limiter = limiter, limit = 5, window = "1s", key = usr)]
async fn misspelled(limiter: &Limiter<MemoryStore>, user: &str) -> Result<(), RateLimited> {
    Ok(())
}

fn main() {}
