use slidegate::{Limiter, MemoryStore, rate_limit};

#[derive(Debug)]
enum AppError {
    NotFound,
}

#[rate_limit(limiter = limiter, limit = 5, window = "1s", key = user)]
async fn lookup(limiter: &Limiter<MemoryStore>, user: &str) -> Result<u32, AppError> {
    Err(AppError::NotFound)
}

fn main() {}
